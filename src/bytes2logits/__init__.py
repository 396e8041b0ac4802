"""Bytes to Logits: reference implementations for the course, and the kit that runs it.

The reference code a learner rebuilds in the labs lives here once; the lab notebooks' solution cells are
generated from it. Later parts of the course import earlier parts from here, so a bug in a learner's lab 1
never blocks lab 5.
"""

from .basic import ByteTokenizer, CharTokenizer, StreamDecoder

__all__ = ["ByteTokenizer", "CharTokenizer", "StreamDecoder"]
__version__ = "0.1.0"
