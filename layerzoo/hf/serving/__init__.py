"""Serving layerzoo folders through vLLM (docs/serving.md): the model class vLLM builds
(`model.LayerzooForVLLM`), its attention layers on vLLM's paged attention (`attention`) and its
recurrent layers on vLLM's state cache (`recurrent`). Only vLLM imports it, through the entry
point in `layerzoo_vllm`; it needs vLLM installed.
"""
