"""A consumer that only reads creates no topic: aiokafka's metadata requests without auto-create.

aiokafka asks the broker for its subscribed topics' metadata with ``allow_auto_topic_creation``
left at the protocol's default, true (``aiokafka.protocol.metadata.MetadataRequest``, version 4
and later), and has no setting for it: a consumer subscribed to a level topic that does not
exist made the broker create it (with ``auto.create.topics.enable``, the broker's default),
and then no level check could name it as missing. :func:`read_only` makes one client's
metadata requests say false; other aiokafka clients of the process are left as they are.
"""

from __future__ import annotations

import functools
from typing import Any

from aiokafka.protocol.metadata import MetadataRequest

__all__ = ["read_only"]


def read_only(client: Any) -> Any:
    """Make ``client`` (an ``AIOKafkaClient``) ask for metadata without creating topics;
    returns it."""
    get_conn = client._get_conn

    @functools.wraps(get_conn)
    async def _get_conn(*args: Any, **kwargs: Any) -> Any:
        conn = await get_conn(*args, **kwargs)
        if conn is not None and not getattr(conn, "_priority_kafka_read_only", False):
            conn.send = _without_auto_create(conn.send)
            conn._priority_kafka_read_only = True
        return conn

    client._get_conn = _get_conn
    return client


def _without_auto_create(send: Any) -> Any:
    @functools.wraps(send)
    def sending(request: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(request, MetadataRequest) and request._allow_auto_topic_creation is None:
            request = MetadataRequest(request._topics, allow_auto_topic_creation=False)
        return send(request, *args, **kwargs)

    return sending
