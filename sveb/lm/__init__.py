"""What runs a model outside the engines: hidden states, critics and their checkpoints (the device and dtype
are sveb.core.device)."""
