"""Evaluation of a model: the NIAH accuracy grid (context length x needle depth) and text loss
against context length."""
