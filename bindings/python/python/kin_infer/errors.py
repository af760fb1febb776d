"""Exceptions raised by kin_infer.

Every error the engine reports arrives as a subclass of :class:`KinInferError`, carrying the
engine's message (which names the file, tensor or field at fault). Each also derives from the
builtin exception it refines, so ``except ValueError`` catches bad input as usual.
"""


class KinInferError(Exception):
    """Base class of every kin_infer error."""


class InvalidInputError(KinInferError, ValueError):
    """The request is malformed: empty, wrong shape, a bad parameter, a token id outside the
    vocabulary, a bad input file."""


class ContextExceededError(InvalidInputError):
    """The prompt or the requested tokens do not fit the model's context."""


class ModelNotFoundError(KinInferError, FileNotFoundError):
    """The model directory, file or artifact does not exist."""


class InvalidModelError(KinInferError, ValueError):
    """A model file is malformed (config, tensors, golden, artifact)."""


class UnsupportedError(KinInferError, NotImplementedError):
    """The model or request uses something this build does not support."""


class ResourceError(KinInferError, MemoryError):
    """Memory or threads could not be had."""


__all__ = [
    "KinInferError",
    "InvalidInputError",
    "ContextExceededError",
    "ModelNotFoundError",
    "InvalidModelError",
    "UnsupportedError",
    "ResourceError",
]
