"""Training across processes: data-parallel ranks (torchrun, gloo or NCCL) and FSDP sharding."""
