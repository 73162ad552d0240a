"""The request the topic-check tests count."""

from __future__ import annotations


METADATA = 3
