"""Consumer management requests: create, update, create-or-update.

Create/update use the ``action`` field of ``$JS.API.CONSUMER.CREATE`` (server
2.10+): ``"create"`` fails with :class:`ConsumerExistsError` (10148) when a
consumer of that name exists with another config, ``"update"`` fails with
:class:`ConsumerDoesNotExistError` (10149) when there is none, and no
action creates or updates.

The methods users call (``stream.create_consumer``, ``ctx.delete_consumer``...)
are declared on ``Stream`` and ``JetStreamContext`` and carried out by the
``ConsumerManager`` of ``consumer_manager.py``; the nats.py entry points are in
``compat.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from .._deadline import Deadline
from .._nuid import NUID
from ..errors import LimitExceededError, RequiredApiLevelError
from . import _api
from .consumer import Consumer
from .consumer_config import ConsumerConfig
from .enums import PriorityPolicy
from .info import ConsumerInfo

if TYPE_CHECKING:
    from ..client import Client
    from ._api import JsApi

__all__ = [
    "CREATE",
    "UPDATE",
    "UPSERT",
    "check_consumer_level",
    "consumer_api_level",
    "create_consumer",
]

# The ``action`` of a CONSUMER.CREATE request.
CREATE = "create"
UPDATE = "update"
UPSERT = ""


# The first nats-server release of each JetStream API level a consumer may need.
_SERVER_OF_LEVEL = {1: "2.11", 2: "2.12", 4: "2.14"}


def consumer_api_level(config: ConsumerConfig) -> int:
    """The JetStream API level a consumer config needs (0 when any server will do).

    Priority groups and pauses came with 2.11 (level 1), the PRIORITIZED
    policy with 2.12 (level 2: a 2.11 server refuses the policy as bad JSON),
    flow-control acks with 2.14 (level 4).
    """
    if config.ack_policy == "flow_control":
        return 4
    if config.priority_policy == PriorityPolicy.PRIORITIZED:
        return 2
    if (
        config.pause_until is not None
        or config.priority_groups
        or config.priority_timeout
        or (config.priority_policy is not None and config.priority_policy != PriorityPolicy.NONE)
    ):
        return 1
    return 0


def check_consumer_level(client: Client, config: ConsumerConfig) -> int:
    """Refuse early a config the connected server is too old for; return its API level.

    Raises:
        RequiredApiLevelError: names the nats-server version needed.
    """
    level = consumer_api_level(config)
    have = int(client.server_info.get("api_lvl", 0))
    if have < level:
        raise RequiredApiLevelError(
            412,
            10185,
            f"this consumer config needs nats-server {_SERVER_OF_LEVEL[level]} or newer "
            f"(JetStream API level {level}; the server offers {have})",
        )
    return level


def create_consumer(
    client: Client,
    api: JsApi,
    stream: str,
    config: ConsumerConfig,
    action: str,
    deadline: Deadline,
    timeout: float,
) -> Consumer:
    """Send one CONSUMER.CREATE request and return a handle on the result.

    A consumer with neither ``name`` nor ``durable_name`` gets a unique name
    (it is ephemeral: the server removes it after ``inactive_threshold``).

    Args:
        client: the connection the handle pulls on.
        api: the context's API helper.
        stream: the stream's name (already checked).
        config: the consumer's config.
        action: :data:`CREATE`, :data:`UPDATE` or :data:`UPSERT`.
        deadline: when to stop waiting for the server's answer.
        timeout: the default timeout of the returned handle.

    Raises:
        ConsumerExistsError: ``action="create"`` and it exists with another config.
        ConsumerDoesNotExistError: ``action="update"`` and it does not exist.
        StreamNotFoundError: no such stream.
        RequiredApiLevelError: the server is too old for the config (before sending).
        APIError: any other refusal.
        TimeoutError: no answer before ``deadline``.
    """
    name = config.name or config.durable_name
    if not name:
        name = NUID.next()
        config = attrs.evolve(config, name=name)
    body: dict[str, Any] = {"stream_name": stream, "config": config.to_api()}
    if action:
        body["action"] = action
    level = check_consumer_level(client, config)
    if (
        config.filter_subject
        and not config.filter_subjects
        and _filter_fits(api, stream, name, config.filter_subject)
    ):
        reply = api.request_json(
            _api.CONSUMER_CREATE_FILTERED, body, deadline, level,
            stream=stream, consumer=name, filter=config.filter_subject,
        )  # fmt: skip
    else:
        reply = api.request_json(
            _api.CONSUMER_CREATE, body, deadline, level, stream=stream, consumer=name
        )
    info = ConsumerInfo.from_api(reply)
    made = action != UPDATE
    return Consumer(client, api, stream, info.name or name, info, timeout, made=made)


def _filter_fits(api: JsApi, stream: str, name: str, filter_subject: str) -> bool:
    """Whether the create request's subject can carry the filter too.

    The filter in the subject is for routing and account permissions; the config
    in the body holds it all the same. A filter too long for the request's control
    line (a literal subject of 4,000 bytes is one a message may have) goes in the
    body alone, under the plain ``CONSUMER.CREATE.<stream>.<consumer>``.
    """
    try:
        api.subject(
            _api.CONSUMER_CREATE_FILTERED, stream=stream, consumer=name, filter=filter_subject
        )
    except LimitExceededError:
        return False
    return True
