"""Training building blocks shared by source fine-tuning (`finetune/`) and the LoRA route (`transfer/lora.py`):
peft LoRA injection (`lora_layers.py`), the seeded minibatch loop and recipe checks (`loop.py`), and
OrthoReg (`orthoreg.py`)."""
