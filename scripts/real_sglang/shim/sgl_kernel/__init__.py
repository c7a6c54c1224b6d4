"""Stand-in for sgl_kernel on a CPU without AMX (put first on PYTHONPATH for SGLang's server).

PyPI's sgl_kernel is a CUDA-only build: importing it fails without libcuda, and SGLang's
CPU path imports it at module load (sglang/kernels/ops/kvcache/cache_move.py). On a CPU
without AMX every kernel call falls back to plain PyTorch, so only names are needed here;
calling one says so, except the one this server calls on every step,
written here in PyTorch. Names without `_cpu` are missing, as in a build without it.
"""


def _missing(name):
    def call(*args, **kwargs):
        raise NotImplementedError(f"sgl_kernel.{name} has no CPU build on PyPI (llmtop's stand-in)")
    call.__name__ = name
    return call


def __getattr__(name):
    # SGLang imports its *_cpu kernels at module load (speculative decoding, KV moves):
    # they exist here as names, and say so only if a path this server does not take calls one.
    if name.endswith("_cpu"):
        return _missing(name)
    raise AttributeError(name)


def assign_req_to_token_pool_cpu(req_pool_indices, req_to_token, start_offset, end_offset,
                                 out_cache_loc, pool_len):
    """Write each request's new KV slots into its row of the token pool (as the Triton
    kernel does, one request per row, their slots in order in ``out_cache_loc``)."""
    starts, ends = start_offset.tolist(), end_offset.tolist()
    taken = 0
    for row, start, end in zip(req_pool_indices.tolist(), starts, ends, strict=False):
        n = end - start
        req_to_token[row, start:end] = out_cache_loc[taken:taken + n].to(req_to_token.dtype)
        taken += n
