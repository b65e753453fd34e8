"""Serve a GGUF model on llama.cpp's OpenAI-compatible server, from the `xllamacpp` wheel (bench/real_model.py's
server; docs/local-model.md). Run it with a Python outside shopbot's virtualenv that has `xllamacpp` installed:

    /path/to/venv/bin/python bench/serve_gguf.py MODEL.gguf --port 8090

The model's own chat template (`use_jinja`), a context of 8192 tokens, 2 threads, temperature 0, one slot (its prompt
cache then serves every request of one conversation), the prompt cache on. It serves until SIGTERM or Ctrl-C.
"""
from __future__ import annotations

import argparse
import signal
import threading


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8090)
    parser.add_argument("--ctx", type=int, default=8192)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    import xllamacpp  # type: ignore[import-not-found]

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.n_ctx = args.ctx
    params.n_parallel = 1
    params.use_jinja = True
    params.cache_prompt = True
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.sampling.temp = 0.0
    params.hostnames = [args.host]
    params.port = args.port
    server = xllamacpp.Server(params)
    print(f"serving {args.model} at {server.listening_address}", flush=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()


if __name__ == "__main__":
    main()
