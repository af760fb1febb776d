"""The model families, importable without torch (the CLI's parser, `doctor` and `model list`
run where torch is absent)."""

FAMILIES = ["lejepa", "t_jepa", "ts_jepa", "cf_jepa", "sigreg"]
TRANSFORMERS = ["lejepa", "t_jepa", "ts_jepa", "cf_jepa"]

#: The formats `inmotion eval` / `quantize eval` sweep by default.
EVAL_FORMATS = ["fp32", "fp16", "bf16", "int8", "int8_pt", "q8", "q6", "q5", "q4", "q3", "q2"]
