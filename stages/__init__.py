"""One module per DVC stage: read params and files, call the core, write outputs, log to MLflow."""
