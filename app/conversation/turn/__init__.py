"""One turn, stage by stage: the path is in pipeline.py."""
