"""The last steps every GGUF fixture generator (python/gen_gguf_*.py) shares: writing the
file in the order gguf's writer requires, and the golden.json beside it."""

import json
import os


def finish(w):
    """Writes a `gguf.GGUFWriter`'s header, metadata and tensors (the only order its state
    machine accepts) and closes the file."""
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_golden(out_dir, golden):
    """`out_dir/golden.json` as these generators always wrote it (indent 1, non-ASCII text
    kept), then the directory's listing on stdout."""
    with open(os.path.join(out_dir, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print("wrote", sorted(os.listdir(out_dir)))
