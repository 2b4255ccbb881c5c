"""The chat prompt the real tier asks SmolLM2, as token ids its tokenizer's chat template makes."""

import torch

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


def chat_ids(tokenizer) -> torch.Tensor:
    """(1, T) ids of QUESTION with the generation prompt (the assistant's turn opened)."""
    return tokenizer.apply_chat_template(QUESTION, add_generation_prompt=True, return_tensors="pt",
                                         return_dict=True)["input_ids"]
