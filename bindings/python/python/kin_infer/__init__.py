"""kin_infer: bit-reproducible transformer inference in pure Rust.

- :class:`Embedder`: sentence embeddings (``encode`` as sentence-transformers users know it),
  identical to the last bit whatever the batch size, thread count or CPU.
- :class:`Generator`: small decoder LLMs (GPT-2, LLaMA, Mistral, Qwen2, Phi, Gemma...), from
  safetensors directories or GGUF files, whole or streamed, with chat templates.
- :mod:`kin_infer.inmotion`: the inMotion time-series classifiers.
- :mod:`kin_infer.ray`: corpus embedding spread over a Ray cluster, merged into the same bytes
  as one ``kin-infer embed`` process.

Everything that computes runs in Rust with the GIL released.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

import numpy as np

from . import _native, errors
from .errors import (
    ContextExceededError,
    InvalidInputError,
    InvalidModelError,
    KinInferError,
    ModelNotFoundError,
    ResourceError,
    UnsupportedError,
)

__version__: str = _native.__version__
#: Changes whenever output bits could change (recorded in every corpus manifest).
NUMERICS_VERSION: str = _native.NUMERICS_VERSION
Q8_NUMERICS_VERSION: str = _native.Q8_NUMERICS_VERSION

__all__ = [
    "Embedder",
    "Generator",
    "Generation",
    "StreamChunk",
    "GenerationStream",
    "NUMERICS_VERSION",
    "Q8_NUMERICS_VERSION",
]
# The error classes, as kin_infer.errors lists them.
__all__ += errors.__all__


def _texts(texts: Union[str, Sequence[str]], what: str = "texts") -> List[str]:
    if isinstance(texts, str):
        return [texts]
    out = list(texts)
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise InvalidInputError(f"{what}[{i}] is {type(t).__name__}, not str")
    return out


class _Progress:
    """A one-line progress report on stderr (no dependency on tqdm)."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.total, self.enabled, self.t0, self.last = total, enabled, time.monotonic(), 0.0

    def update(self, done: int) -> None:
        now = time.monotonic()
        if not self.enabled or (now - self.last < 0.2 and done < self.total):
            return
        self.last = now
        rate = done / max(now - self.t0, 1e-9)
        end = "\n" if done >= self.total else ""
        sys.stderr.write(f"\rBatches: {done}/{self.total} texts, {rate:.0f} texts/s{end}")
        sys.stderr.flush()


class Embedder:
    """A sentence-embedding model: a directory with ``config.json``, safetensors weights and a
    ``tokenizer.json`` (and sentence-transformers' pooling/Dense/normalize configs, if any), an
    encoder GGUF file, or a Hugging Face repo id already in the local cache.

    Args:
        path: model directory, ``.gguf`` file, or ``org/name`` in the Hugging Face cache.
        threads: worker threads (default: ``KIN_INFER_THREADS``, else every logical CPU).
        max_length: tokens per text, special tokens included (default: the model's limit).
        normalize: L2-normalize embeddings (default: as the model's ``modules.json`` says).
        pooling: ``cls``, ``mean``, ``max``, ``mean_sqrt_len_tokens``, ``weightedmean`` or
            ``lasttoken``, joined by ``+`` to concatenate (default: the model's config).
        dimensions: keep the first N dimensions (Matryoshka), re-normalized when normalizing.
        activations: ``q8`` (8-bit activations for ggml-quantized weights), ``f32``, or
            ``auto`` (the faster on this build: f32 for now); default
            ``KIN_INFER_ACTIVATIONS``, else ``auto``.

    The vectors do not depend on ``batch_size`` or ``threads``: they equal
    ``kin-infer embed``'s bit for bit.
    """

    def __init__(
        self,
        path: str,
        *,
        threads: Optional[int] = None,
        max_length: Optional[int] = None,
        normalize: Optional[bool] = None,
        pooling: Optional[str] = None,
        dimensions: Optional[int] = None,
        activations: Optional[str] = None,
    ) -> None:
        self._path = str(path)
        self._options = dict(
            threads=threads, max_length=max_length, normalize=normalize, pooling=pooling,
            dimensions=dimensions, activations=activations,
        )
        self._native = _native.Embedder(str(path), threads, max_length, normalize, pooling, dimensions,
                                        activations)

    def encode(
        self,
        texts: Union[str, Sequence[str]],
        batch_size: int = 32,
        dimensions: Optional[int] = None,
        show_progress_bar: bool = False,
    ) -> np.ndarray:
        """Embeds ``texts``: a float32 array of shape ``[len(texts), dim]``, or ``[dim]`` for
        one string (as sentence-transformers returns).

        Args:
            texts: a string or a sequence of strings.
            batch_size: texts per forward pass (speed only: the bits do not depend on it).
            dimensions: keep the first N dimensions for this call (Matryoshka).
            show_progress_bar: report progress on stderr.
        """
        single = isinstance(texts, str)
        items = _texts(texts)
        if batch_size < 1:
            raise InvalidInputError("batch_size must be at least 1")
        if not show_progress_bar:
            buf, width = self._native.encode(items, batch_size, dimensions)
            out = np.frombuffer(buf, dtype=np.float32).reshape(len(items), width)
        else:
            bar = _Progress(len(items), True)
            parts = []
            width = self.dim if dimensions is None else dimensions
            for start in range(0, len(items), batch_size):
                buf, width = self._native.encode(items[start:start + batch_size], batch_size, dimensions)
                parts.append(np.frombuffer(buf, dtype=np.float32).reshape(-1, width))
                bar.update(min(start + batch_size, len(items)))
            out = np.concatenate(parts) if parts else np.zeros((0, width), dtype=np.float32)
        return out[0] if single else out

    def tokenize(self, texts: Union[str, Sequence[str]]) -> Dict[str, List[List[int]]]:
        """Token ids of each text as the model sees them (truncated, special tokens added, no
        padding): ``{"input_ids", "token_type_ids", "attention_mask"}``."""
        return self._native.tokenize(_texts(texts))

    @property
    def dim(self) -> int:
        """Width of the embeddings (after any ``dimensions`` truncation)."""
        return self._native.dim

    def get_sentence_embedding_dimension(self) -> int:
        """sentence-transformers' name for :attr:`dim`."""
        return self._native.dim

    @property
    def max_length(self) -> int:
        return self._native.max_length

    @property
    def max_seq_length(self) -> int:
        """sentence-transformers' name for :attr:`max_length`."""
        return self._native.max_length

    @property
    def normalize(self) -> bool:
        return self._native.normalize

    @property
    def pooling(self) -> str:
        return self._native.pooling

    @property
    def threads(self) -> int:
        return self._native.threads

    @property
    def path(self) -> str:
        """The resolved model directory or file."""
        return self._native.path

    @property
    def family(self) -> str:
        return self._native.family

    @property
    def simd_tier(self) -> str:
        """The kernel tier in use (generic, sse, avx2, avx512, neon)."""
        return self._native.tier

    @property
    def activations(self) -> str:
        """The activation numerics it runs: ``q8`` (8-bit activations over ggml-quantized
        weights) or ``f32``."""
        return self._native.activations

    @property
    def numerics_version(self) -> str:
        """The numerics version its embeddings are pinned to (changes whenever output bits
        could change): ``NUMERICS_VERSION``, or ``Q8_NUMERICS_VERSION`` when it runs q8."""
        return self._native.numerics_version

    def __repr__(self) -> str:
        return (f"Embedder({self.path!r}, family={self.family!r}, dim={self.dim}, "
                f"pooling={self.pooling!r}, normalize={self.normalize}, threads={self.threads})")


@dataclass
class Generation:
    """A finished generation."""

    text: Optional[str]
    token_ids: List[int]
    #: ``eos``, ``max_tokens``, ``context``, ``stop_string``, or ``cancelled``.
    stop_reason: str
    prompt_tokens: int
    prefill_tokens_per_s: float
    decode_tokens_per_s: float

    @classmethod
    def _from(cls, d: Dict[str, Any]) -> "Generation":
        return cls(**d)


@dataclass
class StreamChunk:
    """One generated token and the text it completes (empty while a stop string may be
    forming or a character is split across tokens)."""

    token_id: int
    text: str


class GenerationStream:
    """Iterates over a generation token by token; :attr:`result` is set once it is exhausted.
    Breaking out early and calling :meth:`close` stops the generation."""

    def __init__(self, native: Any) -> None:
        self._native = native
        self.result: Optional[Generation] = None

    def __iter__(self) -> Iterator[StreamChunk]:
        return self

    def __next__(self) -> StreamChunk:
        try:
            token_id, text = next(self._native)
        except StopIteration:
            self._finish()
            raise
        return StreamChunk(token_id, text)

    def _finish(self) -> None:
        r = self._native.result()
        if r is not None:
            self.result = Generation._from(r)

    def close(self) -> None:
        self._native.close()
        self._finish()

    def __enter__(self) -> "GenerationStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


Prompt = Union[str, Sequence[int], Sequence[Dict[str, str]]]


class Generator:
    """A decoder LLM: a directory with ``config.json`` and safetensors weights (and its
    ``tokenizer.json`` and chat template), a ``.gguf`` file, or a repo id in the Hugging Face
    cache.

    A prompt is a string, a list of token ids, or a list of chat messages
    (``{"role": ..., "content": ...}``) rendered through the model's chat template.
    Greedy decoding (``temperature=0``, the default) gives ``kin-infer generate``'s tokens.
    ``activations`` is ``q8`` (8-bit activations for ggml-quantized weights), ``f32``, or
    ``auto`` (the faster on this build: f32 for now); default ``KIN_INFER_ACTIVATIONS``,
    else ``auto``.
    """

    def __init__(self, path: str, *, threads: Optional[int] = None,
                 activations: Optional[str] = None) -> None:
        self._native = _native.Generator(str(path), threads, activations)

    @property
    def activations(self) -> str:
        """The activation numerics it runs: ``q8`` or ``f32``."""
        return self._native.activations

    @property
    def numerics_version(self) -> str:
        """The numerics version its logits are pinned to."""
        return self._native.numerics_version

    def _prompt(self, prompt: Prompt) -> List[int]:
        if isinstance(prompt, str):
            return self._native.encode(prompt)
        try:
            items = list(prompt)
        except TypeError:
            items = None
        if items is None:
            pass
        elif items and all(isinstance(m, dict) for m in items):
            msgs = []
            for i, m in enumerate(items):
                role, content = m.get("role"), m.get("content", "")
                if not isinstance(role, str) or not isinstance(content, str):
                    raise InvalidInputError(f"message {i} needs a string `role` and `content`")
                msgs.append((role, content))
            return self._native.encode_chat(msgs)
        elif all(isinstance(t, (int, np.integer)) and not isinstance(t, bool) for t in items):
            for t in items:
                if t < 0 or t >= 2**32:
                    raise InvalidInputError(f"token id {t} is out of range")
            return [int(t) for t in items]
        raise InvalidInputError(
            "prompt must be a string, a list of token ids, or a list of chat messages "
            "({'role': ..., 'content': ...})"
        )

    @staticmethod
    def _sampling(max_tokens: int, temperature: float, top_k: int, top_p: float, min_p: float,
                  repetition_penalty: float, frequency_penalty: float, presence_penalty: float,
                  seed: int, stop: Union[None, str, Sequence[str]]) -> Dict[str, Any]:
        if isinstance(stop, str):
            stop = [stop]
        if max_tokens < 0:
            raise InvalidInputError("max_tokens must be at least 0")
        if seed < 0 or seed >= 2**64:
            raise InvalidInputError("seed must be in [0, 2**64)")
        return dict(max_tokens=int(max_tokens), temperature=float(temperature), top_k=int(top_k),
                    top_p=float(top_p), min_p=float(min_p),
                    repetition_penalty=float(repetition_penalty),
                    frequency_penalty=float(frequency_penalty),
                    presence_penalty=float(presence_penalty), seed=int(seed),
                    stop=list(stop or []))

    def generate(
        self,
        prompt: Prompt,
        max_tokens: int = 256,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int = 0,
        stop: Union[None, str, Sequence[str]] = None,
        *,
        top_k: int = 0,
        min_p: float = 0.0,
        repetition_penalty: float = 1.0,
        frequency_penalty: float = 0.0,
        presence_penalty: float = 0.0,
    ) -> Generation:
        """Generates up to ``max_tokens`` after ``prompt``; stops early at an EOS token, a
        ``stop`` string (excluded from the text) or a full context."""
        ids = self._prompt(prompt)
        s = self._sampling(max_tokens, temperature, top_k, top_p, min_p, repetition_penalty,
                           frequency_penalty, presence_penalty, seed, stop)
        return Generation._from(self._native.generate(ids, s))

    def stream(
        self,
        prompt: Prompt,
        max_tokens: int = 256,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int = 0,
        stop: Union[None, str, Sequence[str]] = None,
        *,
        top_k: int = 0,
        min_p: float = 0.0,
        repetition_penalty: float = 1.0,
        frequency_penalty: float = 0.0,
        presence_penalty: float = 0.0,
    ) -> GenerationStream:
        """:meth:`generate`, token by token: iterate over :class:`StreamChunk` s. The same
        tokens as :meth:`generate` with the same arguments."""
        ids = self._prompt(prompt)
        s = self._sampling(max_tokens, temperature, top_k, top_p, min_p, repetition_penalty,
                           frequency_penalty, presence_penalty, seed, stop)
        return GenerationStream(self._native.stream(ids, s))

    def chat(self, messages: Sequence[Dict[str, str]], **kwargs: Any) -> Generation:
        """:meth:`generate` on chat messages (rendered through the model's chat template)."""
        if not messages:
            raise InvalidInputError("messages is empty")
        return self.generate(list(messages), **kwargs)

    def encode(self, text: str) -> List[int]:
        """Token ids of ``text`` as a prompt (special tokens such as BOS added)."""
        return self._native.encode(text)

    def decode(self, ids: Sequence[int]) -> str:
        return self._native.decode([int(i) for i in ids])

    @property
    def context_length(self) -> int:
        return self._native.context_length

    @property
    def vocab_size(self) -> int:
        return self._native.vocab_size

    @property
    def family(self) -> str:
        return self._native.family

    @property
    def eos_token_ids(self) -> List[int]:
        return self._native.eos_token_ids

    @property
    def threads(self) -> int:
        return self._native.threads

    @property
    def path(self) -> str:
        return self._native.path

    def __repr__(self) -> str:
        return f"Generator({self.path!r}, family={self.family!r}, context={self.context_length})"
