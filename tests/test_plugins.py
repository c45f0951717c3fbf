"""The plug-in registry that agents, sandbox backends and task kinds share: lookup by name,
settings checked by the plug-in's own model, and modules imported only when used."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from heldout.errors import HeldoutError, SandboxError
from heldout.plugins import InvalidSettings, Plugin, Registry, UnknownPlugin

PLUGIN_MODULE = textwrap.dedent('''
    from pydantic import BaseModel, ConfigDict


    class Retry(BaseModel):
        model_config = ConfigDict(extra="forbid")
        times: int = 1


    class Settings(BaseModel):
        model_config = ConfigDict(extra="forbid")
        size: int
        retry: Retry = Retry()


    def make(settings, scale):
        return ("made", settings, scale)
''')


@pytest.fixture
def registry(tmp_path, monkeypatch):
    """A registry of one plug-in whose module no test has imported yet."""
    module = f"plugin_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text(PLUGIN_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield Registry("widget", [Plugin("square", f"{module}:make", "Settings"),
                              Plugin("round", f"{module}:make", "Settings")])
    sys.modules.pop(module, None)


def test_a_plugin_is_made_from_its_validated_settings_and_the_callers_arguments(registry):
    made, settings, scale = registry.create("square", {"size": "3"}, 2.5)
    assert (made, settings.size, settings.retry.times, scale) == ("made", 3, 1, 2.5)
    assert type(settings).__name__ == "Settings"


def test_the_module_is_imported_only_when_the_plugin_is_used(registry):
    module = registry["square"].module
    assert "square" in registry and "round" in registry
    assert list(registry) == ["square", "round"] == list(registry.names)
    assert module not in sys.modules
    registry.create("square", {"size": 1}, 1)
    assert module in sys.modules


def test_an_unknown_name_names_the_choices(registry):
    assert "hexagon" not in registry
    assert ["hexagon"] not in registry  # unhashable names are simply not there
    with pytest.raises(UnknownPlugin) as raised:
        registry.create("hexagon", {}, 1)
    assert str(raised.value) == "unknown widget 'hexagon'; choose one of square, round"
    assert raised.value.choices == ("square", "round")
    assert isinstance(raised.value, HeldoutError)


def test_bad_settings_name_every_field_dotted_and_what_the_model_has(registry):
    with pytest.raises(InvalidSettings) as raised:
        registry.create("square", {"size": "big", "retry": {"times": "x"}, "colour": "red"}, 1)
    error = raised.value
    assert [problem.field for problem in error.problems] == ["size", "retry.times", "colour"]
    assert str(error).splitlines() == [
        "square: size: Input should be a valid integer, unable to parse string as an integer",
        "square: retry.times: Input should be a valid integer, unable to parse string as an "
        "integer",
        "square: colour: not a field heldout reads; the fields are size, retry",
    ]
    assert error.unknown_fields() == ["colour"]
    with pytest.raises(InvalidSettings, match="sizes: not a field heldout reads; did you mean "
                                              "'size'"):
        registry.create("square", {"sizes": 3}, 1)
    assert error.fields == ("size", "retry")
    assert error.render("params.yaml: widgets.a.").startswith("params.yaml: widgets.a.size: ")


def test_choosing_an_agent_or_a_backend_imports_no_other():
    """Importing the registries imports no plug-in; an agent kind brings in its module only."""
    probe = textwrap.dedent('''
        import sys
        from heldout.agents.protocol import AgentContext
        from heldout.agents.registry import make_agent
        import heldout.episodes.judge, heldout.sandbox, heldout.tasks
        context = AgentContext("{prompt}", 0.8, 0.95, 64, 1, 10.0, ".")
        make_agent("c", {"agent": "oracle"}, context)
        print(sorted(m for m in ("heldout.agents.canaries", "heldout.agents.openai", "httpx",
                                 "heldout.agents.demo", "heldout.sandbox.docker", "docker",
                                 "heldout.sandbox.subprocess") if m in sys.modules))
    ''')
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "['heldout.agents.canaries']"


def test_agents_and_backends_keep_their_own_error_wording():
    from heldout.agents.registry import AGENT_KINDS
    from heldout.sandbox import BACKENDS, make_sandbox

    assert BACKENDS.names == ("subprocess", "docker")
    assert "openai" in AGENT_KINDS
    with pytest.raises(SandboxError, match=r"choose one of \('subprocess', 'docker'\)"):
        make_sandbox("vm")
    with pytest.raises(SandboxError, match="^sandbox backend 'subprocess' has no setting colour, "
                                           "size; it has hidden_paths, python, wall_factor, "
                                           "workers$"):
        make_sandbox("subprocess", size=1, colour="blue")
    with pytest.raises(SandboxError, match="^sandbox backend 'subprocess': workers: Input should "
                                           "be greater than or equal to 1$"):
        make_sandbox("subprocess", workers=0)
    with pytest.raises(SandboxError, match="^sandbox backend 'docker': container_per: Input "
                                           "should be 'task' or 'program'$"):
        make_sandbox("docker", container_per="host")
