"""inmotion: the Python side of the inMotion edge runtime (issue 5).

Reference PyTorch modules for the five families (lejepa, t_jepa, ts_jepa, cf_jepa, sigreg),
the in-house quantizer, the exporter of inmotion-artifact/1 directories
(/work/shared/specs/inmotion-artifact.md), training on the inMotion dataset and the MCC sweep.

    cd python && python3 -m inmotion --help
    python3 -m inmotion fixtures        # regenerate tests/fixtures/inmotion/** deterministically
                                        # (trains the five small models: a few minutes, one thread)

Pinned stack (python/inmotion-lock.txt): Python 3.11.7, torch==2.15.0 (CPU), numpy==2.4.6,
safetensors==0.8.0. scikit-learn is not needed (the split and MCC are re-implemented in numpy
and checked against scikit-learn by python/test_inmotion.py when it is importable).
"""

__version__ = "0.1.0"
