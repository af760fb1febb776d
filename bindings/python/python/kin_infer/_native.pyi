"""Type stubs of the native extension (the Rust half of kin_infer). Use the pure-Python API in
``kin_infer``, ``kin_infer.inmotion`` and ``kin_infer.ray``; these signatures may change."""

from typing import Any, Dict, Iterator, List, Optional, Tuple

NUMERICS_VERSION: str
Q8_NUMERICS_VERSION: str
__version__: str

class Embedder:
    def __init__(
        self,
        path: str,
        threads: Optional[int] = None,
        max_length: Optional[int] = None,
        normalize: Optional[bool] = None,
        pooling: Optional[str] = None,
        dimensions: Optional[int] = None,
        activations: Optional[str] = None,
    ) -> None: ...
    def encode(
        self, texts: List[str], batch_size: int = 32, dimensions: Optional[int] = None
    ) -> Tuple[bytearray, int]: ...
    def tokenize(self, texts: List[str]) -> Dict[str, List[List[int]]]: ...
    def identity(self, input_format: str = "jsonl") -> str: ...
    def write_shard(
        self, run_dir: str, k: int, batch_size: int = 32, lock_wait_s: float = 300.0
    ) -> Tuple[int, int]: ...
    dim: int
    max_length: int
    normalize: bool
    pooling: str
    threads: int
    path: str
    family: str
    tier: str
    activations: str
    numerics_version: str

class Stream(Iterator[Tuple[int, str]]):
    def __iter__(self) -> "Stream": ...
    def __next__(self) -> Tuple[int, str]: ...
    def result(self) -> Optional[Dict[str, Any]]: ...
    def close(self) -> None: ...

class Generator:
    def __init__(
        self, path: str, threads: Optional[int] = None, activations: Optional[str] = None
    ) -> None: ...
    def encode(self, text: str) -> List[int]: ...
    def decode(self, ids: List[int]) -> str: ...
    def encode_chat(self, messages: List[Tuple[str, str]]) -> List[int]: ...
    def generate(self, prompt: List[int], sampling: Dict[str, Any]) -> Dict[str, Any]: ...
    def stream(self, prompt: List[int], sampling: Dict[str, Any]) -> Stream: ...
    context_length: int
    vocab_size: int
    family: str
    eos_token_ids: List[int]
    has_tokenizer: bool
    has_chat_template: bool
    threads: int
    path: str
    activations: str
    numerics_version: str

class Model:
    def __init__(self, artifact_dir: str) -> None: ...
    def classify(self, data: bytes, n: int, raw: bool = False) -> Tuple[bytearray, bytearray]: ...
    def check(self, golden: str) -> Dict[str, Any]: ...
    seq_len: int
    in_channels: int
    num_classes: int
    classes: Optional[List[str]]
    family: str
    has_preprocess: bool

def prepare_run(
    run_dir: str, input: str, jsonl: bool, shard_items: int, identity: str
) -> str: ...
def pending_shards(run_dir: str) -> List[int]: ...
def merge(run_dir: str, out: str) -> Tuple[int, int, int]: ...
def read_shard(run_dir: str, k: int) -> Tuple[List[int], List[str], bytearray, int]: ...
