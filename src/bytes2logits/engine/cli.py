"""The engine's commands: ``inspect``, ``tokenize`` and ``chat`` (``python -m bytes2logits COMMAND``)."""

from __future__ import annotations

import argparse
import json
import os
import sys

from ..errors import ContextFullError, GGUFError, TemplateError, TokenizerError

ENGINE_ERRORS = (GGUFError, TokenizerError, TemplateError, ContextFullError)


def _default_model() -> str:
    from .. import assets

    return str(assets.path("smollm2"))


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 1


def inspect_main(argv: list[str]) -> int:
    """``inspect FILE.gguf``: print the metadata (long values summarised) and the tensor table."""
    p = argparse.ArgumentParser(prog="python -m bytes2logits inspect", description=inspect_main.__doc__)
    p.add_argument("file", help="a .gguf file")
    args = p.parse_args(argv)
    from .gguf import GGUFReader, format_summary

    try:
        with GGUFReader(args.file) as reader:
            print(format_summary(reader))
    except (GGUFError, OSError) as e:
        return _fail(str(e))
    return 0


def tokenize_main(argv: list[str]) -> int:
    """``tokenize [--model PATH] [--special] TEXT``: print the token ids of TEXT as JSON."""
    p = argparse.ArgumentParser(prog="python -m bytes2logits tokenize", description=tokenize_main.__doc__)
    p.add_argument("text", help="the text to tokenize (use - to read standard input)")
    p.add_argument("--model", help="a .gguf file with tokenizer metadata (default: the SmolLM2 asset)")
    p.add_argument("--special", action="store_true",
                   help="parse special-token strings such as <|im_start|> into their ids (off: plain text)")
    p.add_argument("--add-special", action="store_true", help="add BOS/EOS as the model's metadata asks")
    p.add_argument("--pieces", action="store_true", help="also print each id's token string")
    args = p.parse_args(argv)
    from .tokenizer import Tokenizer

    if args.text == "-":
        raw = sys.stdin.buffer.read()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            return _fail(f"standard input is not valid UTF-8: {e.reason} at byte offset {e.start}")
    else:
        text = args.text
    try:
        tok = Tokenizer.from_gguf(args.model or _default_model())
        ids = tok.encode(text, allowed_special="all" if args.special else None, add_special=args.add_special)
    except (*ENGINE_ERRORS, OSError) as e:
        return _fail(str(e))
    print(json.dumps(ids))
    if args.pieces:
        print(json.dumps([tok.id_to_token(i) for i in ids], ensure_ascii=False))
    return 0


def _sampler(args):
    from .generate import Sampler

    if args.greedy:  # the argmax, after the repetition penalty if one is asked for
        return Sampler(temperature=0.0, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=args.repeat_penalty)
    return Sampler(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, min_p=args.min_p,
                   repeat_penalty=args.repeat_penalty, seed=args.seed)


def chat_main(argv: list[str]) -> int:
    """``chat``: talk to a GGUF model (default: SmolLM2-135M-Instruct), one shot with -p or interactively."""
    p = argparse.ArgumentParser(prog="python -m bytes2logits chat", description=chat_main.__doc__)
    p.add_argument("--model", help="a .gguf file (default: the SmolLM2-135M-Instruct asset)")
    p.add_argument("-p", "--prompt", help="ask one question, print the answer and exit")
    p.add_argument("--system", help="a system prompt")
    p.add_argument("--max-tokens", type=int, default=512, help="most tokens per answer (default 512)")
    p.add_argument("--temperature", type=float, default=0.8, help="sampling temperature (default 0.8; 0 = greedy)")
    p.add_argument("--top-k", type=int, default=40, help="keep the k most likely tokens (default 40; 0 = off)")
    p.add_argument("--top-p", type=float, default=0.95, help="nucleus sampling threshold (default 0.95; 1 = off)")
    p.add_argument("--min-p", type=float, default=0.05,
                   help="drop tokens below min_p × the top probability (default 0.05)")
    p.add_argument("--repeat-penalty", type=float, default=1.0, help="penalty for recent tokens (default 1.0 = off)")
    p.add_argument("--seed", type=int, default=None, help="random seed, for reproducible sampling")
    p.add_argument("--greedy", action="store_true", help="always take the most likely token")
    p.add_argument("--stop", action="append", default=[], help="stop when this text appears (repeatable)")
    p.add_argument("--n-ctx", type=int, default=None, help="context window in tokens (default: min(training, 4096))")
    p.add_argument("--numerics", choices=("exact", "ggml"), default="exact",
                   help="float32 math (exact, default) or llama.cpp's quantized-kernel numerics (ggml)")
    p.add_argument("--lookup", type=int, default=0, metavar="N",
                   help="prompt-lookup decoding: check up to N tokens copied from the context per model call "
                        "(default 0 = off; same answer under --greedy, faster when the answer quotes the prompt)")
    p.add_argument("--verbose", action="store_true", help="show prompt tokens and prefill/decode speeds")
    args = p.parse_args(argv)
    if args.max_tokens <= 0:
        return _fail(f"--max-tokens must be positive, got {args.max_tokens}")
    if any(not s for s in args.stop):
        return _fail("--stop needs a non-empty text")
    if args.lookup < 0:
        return _fail(f"--lookup must be >= 0 (0 = off), got {args.lookup}")

    from .model import Model
    from .session import ChatSession, print_stats
    from .tokenizer import Tokenizer

    try:
        path = args.model or _default_model()
        sampler = _sampler(args)
        model = Model.from_gguf(path, n_ctx=args.n_ctx, numerics=args.numerics, progress=sys.stderr.isatty())
        tokenizer = Tokenizer.from_gguf(model.reader)
        session = ChatSession(model, tokenizer, system=args.system, sampler=sampler,
                              max_tokens=args.max_tokens, stop_strings=tuple(args.stop), lookup=args.lookup)
    except (*ENGINE_ERRORS, OSError, ValueError) as e:
        return _fail(str(e))
    if args.verbose:
        hp = model.hparams
        print(f"[{os.path.basename(path)}: {hp.arch}, {hp.n_layer} layers, vocab {hp.n_vocab}; loaded in "
              f"{model.load_seconds:.1f} s, {model.weight_bytes / 2**20:.0f} MiB of float32 weights; "
              f"numerics {args.numerics}]", file=sys.stderr)

    def turn(text: str) -> None:
        if args.verbose:
            ids = session.prompt_ids(session.messages + [{"role": "user", "content": text}])
            print(f"[prompt tokens: {json.dumps(ids)}]", file=sys.stderr)
        for piece in session.send(text):
            print(piece, end="", flush=True)
        print()
        if session.last is not None and session.last.stop_reason == "context_full":
            print(f"[{session.last.stop_message}]", file=sys.stderr)
        if args.verbose:
            print_stats(session)

    try:
        if args.prompt is not None:
            turn(args.prompt)
            return 0
        print("Chatting with", os.path.basename(path), "— /reset starts over, /exit or Ctrl-D quits.", file=sys.stderr)
        while True:
            try:
                text = input("> ")
            except EOFError:
                print(file=sys.stderr)
                return 0
            if text.strip() in ("/exit", "/quit"):
                return 0
            if text.strip() == "/reset":
                session.reset()
                print("[new conversation]", file=sys.stderr)
                continue
            if not text.strip():
                continue
            try:
                turn(text)
            except KeyboardInterrupt:
                print("\n[stopped]", file=sys.stderr)
            except ContextFullError as e:
                print(f"\n[{e}]", file=sys.stderr)
    except (*ENGINE_ERRORS, ValueError, TypeError) as e:
        # Engine errors, and the checks of sampler/generation arguments and of the logits (NaN from a
        # broken file): one line, no traceback.
        return _fail(str(e))
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130
