"""The benchmark of the training and inference paths the book teaches (`python -m tools.bench`).

plan.py: which paths run; machine.py: this machine's limit; run.py: the training rounds;
inference.py: eager vs compiled vs ONNX Runtime; report.py: rows, report, plot, JSON;
__main__.py: the command line.
"""
