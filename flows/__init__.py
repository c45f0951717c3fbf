"""Prefect flows over the stages: `flows.<stage>` holds `<stage>_flow`, which `heldout stage`
finds by that name, so adding a stage needs no registry edit."""
