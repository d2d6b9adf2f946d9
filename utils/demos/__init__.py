"""Small scripts the chapters run as child processes (python -m utils.demos.<name>), so their output can be shown."""
