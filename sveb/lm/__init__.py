"""What runs a model outside the engines: hidden states, critics and their checkpoints, device and dtype."""
