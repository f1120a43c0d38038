"""Config and info classes: wire round trips, checks, unknown keys (no server needed).

The JSON samples below are replies of a real nats-server 2.15.1 (one server
and a three-node cluster), captured as they came.
"""

from __future__ import annotations

import copy
import json
import pickle
from datetime import UTC, datetime, timedelta, timezone

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from jetstream_sync._timefmt import (
    NanoDatetime,
    datetime_from_ns,
    format_rfc3339,
    ns_to_seconds,
    parse_rfc3339,
    seconds_to_ns,
)
from jetstream_sync.errors import StreamNotFoundError
from jetstream_sync.headers import Headers
from jetstream_sync.jetstream import consumer_config, enums, info, stream_config
from jetstream_sync.jetstream.config import (
    ConsumerConfig,
    ExternalStream,
    OrderedConsumerConfig,
    Placement,
    Republish,
    StreamConfig,
    StreamConsumerLimits,
    StreamConsumerSource,
    StreamSource,
    SubjectTransform,
    config_matches,
    merge_config,
)
from jetstream_sync.jetstream.enums import (
    AckPolicy,
    DeliverPolicy,
    DiscardPolicy,
    MigrationStatusType,
    PersistMode,
    PriorityPolicy,
    ReplayPolicy,
    RetentionPolicy,
    StorageType,
    StoreCompression,
)
from jetstream_sync.jetstream.info import (
    AccountInfo,
    APIErrorInfo,
    ClusterInfo,
    ConsumerInfo,
    PubAck,
    RawStreamMsg,
    StreamInfo,
)

# --------------------------------------------------------------------------
# Samples: real server replies.

STREAM_CREATE_ORDERS = json.loads(
    '{"type":"io.nats.jetstream.api.v1.stream_create_response","config":{"name":"ORDERS","des'
    'cription":"all orders","subjects":["orders.>"],"retention":"limits","max_consumers":-1,"'
    'max_msgs":-1,"max_bytes":-1,"max_age":86400000000000,"max_msgs_per_subject":100,"max_msg'
    '_size":-1,"discard":"old","storage":"file","num_replicas":1,"duplicate_window":600000000'
    '00,"compression":"s2","subject_transform":{"src":"orders.*.*","dest":"orders.{{wildcard('
    '2)}}.{{wildcard(1)}}"},"republish":{"src":"orders.>","dest":"repub.orders.>","headers_on'
    'ly":true},"allow_direct":true,"mirror_direct":false,"sealed":false,"deny_delete":false,"'
    'deny_purge":false,"allow_rollup_hdrs":true,"consumer_limits":{"inactive_threshold":30000'
    '000000,"max_ack_pending":5000},"allow_msg_ttl":true,"subject_delete_marker_ttl":50000000'
    '00,"allow_atomic":true,"allow_msg_schedules":true,"allow_batched":true,"metadata":{"_nat'
    's.level":"5","_nats.req.level":"4","_nats.ver":"2.15.1","owner":"team-a"}},"created":"20'
    '26-11-22T04:11:17.012439442Z","state":{"messages":0,"bytes":0,"first_seq":0,"first_ts":"'
    '0001-01-01T00:00:00Z","last_seq":0,"last_ts":"0001-01-01T00:00:00Z","consumer_count":0},'
    '"ts":"2026-11-22T04:11:17.014461695Z","did_create":true}'
)

STREAM_INFO_SOURCES = json.loads(
    '{"type":"io.nats.jetstream.api.v1.stream_info_response","total":0,"offset":0,"limit":0,"'
    'config":{"name":"AGG","subjects":["agg.>"],"retention":"limits","max_consumers":-1,"max_'
    'msgs":-1,"max_bytes":-1,"max_age":0,"max_msgs_per_subject":-1,"max_msg_size":-1,"discard'
    '":"old","storage":"file","num_replicas":1,"placement":{"tags":["az:1"]},"sources":[{"nam'
    'e":"ORDERS","opt_start_time":"2024-01-02T03:04:05.123456789Z","filter_subject":"orders.e'
    'u.>"},{"name":"REMOTE","subject_transforms":[{"src":"x.>","dest":"y.>"}],"external":{"ap'
    'i":"$JS.other.API","deliver":"deliver.other"}}],"compression":"none","allow_direct":fals'
    'e,"mirror_direct":false,"sealed":false,"deny_delete":false,"deny_purge":false,"allow_rol'
    'lup_hdrs":false,"consumer_limits":{},"allow_msg_ttl":false,"metadata":{"_nats.level":"5"'
    ',"_nats.req.level":"0","_nats.ver":"2.15.1"}},"created":"2026-11-22T04:11:17.030405525Z"'
    ',"state":{"messages":0,"bytes":0,"first_seq":0,"first_ts":"0001-01-01T00:00:00Z","last_s'
    'eq":0,"last_ts":"0001-01-01T00:00:00Z","consumer_count":0},"cluster":{"leader":"single"}'
    ',"sources":[{"name":"ORDERS","lag":0,"active":-1,"error":{"code":400,"err_code":10082,"d'
    'escription":"consumer requires ack policy for max ack pending"},"filter_subject":"orders'
    '.eu.>"},{"name":"REMOTE","external":{"api":"$JS.other.API","deliver":"deliver.other"},"l'
    'ag":0,"active":-1,"subject_transforms":[{"src":"x.>","dest":"y.>"}]}],"ts":"2026-11-22T0'
    '4:11:18.538107709Z"}'
)

STREAM_INFO_MIRROR = json.loads(
    '{"type":"io.nats.jetstream.api.v1.stream_info_response","total":0,"offset":0,"limit":0,"'
    'config":{"name":"MIRROR","retention":"limits","max_consumers":-1,"max_msgs":-1,"max_byte'
    's":-1,"max_age":0,"max_msgs_per_subject":-1,"max_msg_size":-1,"discard":"old","storage":'
    '"memory","num_replicas":1,"mirror":{"name":"ORDERS","opt_start_seq":2,"subject_transform'
    's":[{"src":"orders.>","dest":"m.orders.>"}]},"compression":"none","allow_direct":false,"'
    'mirror_direct":true,"sealed":false,"deny_delete":false,"deny_purge":false,"allow_rollup_'
    'hdrs":false,"consumer_limits":{},"allow_msg_ttl":false,"metadata":{"_nats.level":"5","_n'
    'ats.req.level":"0","_nats.ver":"2.15.1"}},"created":"2026-11-22T04:11:17.029070924Z","st'
    'ate":{"messages":0,"bytes":0,"first_seq":0,"first_ts":"0001-01-01T00:00:00Z","last_seq":'
    '0,"last_ts":"0001-01-01T00:00:00Z","consumer_count":0},"cluster":{"leader":"single"},"mi'
    'rror":{"name":"ORDERS","lag":0,"active":-1,"error":{"code":400,"err_code":10082,"descrip'
    'tion":"consumer requires ack policy for max ack pending"},"subject_transforms":[{"src":"'
    'orders.>","dest":"m.orders.>"}]},"ts":"2026-11-22T04:11:18.539984841Z"}'
)

STREAM_INFO_R3 = json.loads(
    '{"type":"io.nats.jetstream.api.v1.stream_info_response","total":0,"offset":0,"limit":0,"'
    'config":{"name":"R3","subjects":["r3.>"],"retention":"limits","max_consumers":-1,"max_ms'
    'gs":-1,"max_bytes":-1,"max_age":0,"max_msgs_per_subject":-1,"max_msg_size":-1,"discard":'
    '"old","storage":"file","num_replicas":3,"duplicate_window":120000000000,"placement":{"cl'
    'uster":"C1"},"compression":"none","allow_direct":false,"mirror_direct":false,"sealed":fa'
    'lse,"deny_delete":false,"deny_purge":false,"allow_rollup_hdrs":false,"consumer_limits":{'
    '},"allow_msg_ttl":false,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":'
    '"2.15.1"}},"created":"2026-11-22T04:11:20.563686459Z","state":{"messages":3,"bytes":105,'
    '"first_seq":1,"first_ts":"2026-11-22T04:11:20.640323112Z","last_seq":3,"last_ts":"2026-1'
    '1-22T04:11:20.64311862Z","num_subjects":1,"consumer_count":1},"domain":"hub","cluster":{'
    '"name":"C1","raft_group":"S-R3F-fWnEHgWo","leader":"n2","leader_since":"2026-11-22T04:11'
    ':20.638081456Z","system_account":true,"traffic_account":"$SYS","replicas":[{"name":"n1",'
    '"current":true,"active":166054712,"peer":"fjFyEjc1"},{"name":"n3","current":true,"active'
    '":166081736,"peer":"BXScrY9i"}]},"alternates":[{"name":"R3M","domain":"hub","cluster":"C'
    '1"},{"name":"R3","domain":"hub","cluster":"C1"}],"ts":"2026-11-22T04:11:22.804914939Z"}'
)

STREAM_CREATE_COUNTERS = json.loads(
    '{"type":"io.nats.jetstream.api.v1.stream_create_response","config":{"name":"COUNTERS","s'
    'ubjects":["cnt.>"],"retention":"limits","max_consumers":-1,"max_msgs":-1,"max_bytes":-1,'
    '"max_age":0,"max_msgs_per_subject":-1,"max_msg_size":1024,"discard":"old","storage":"fil'
    'e","num_replicas":1,"duplicate_window":120000000000,"compression":"none","first_seq":100'
    ',"allow_direct":false,"mirror_direct":false,"sealed":false,"deny_delete":true,"deny_purg'
    'e":false,"allow_rollup_hdrs":false,"consumer_limits":{},"allow_msg_ttl":false,"allow_msg'
    '_counter":true,"persist_mode":"async","metadata":{"_nats.level":"5","_nats.req.level":"2'
    '","_nats.ver":"2.15.1"}},"created":"2026-11-22T04:11:17.018701417Z","state":{"messages":'
    '0,"bytes":0,"first_seq":100,"first_ts":"0001-01-01T00:00:00Z","last_seq":99,"last_ts":"0'
    '001-01-01T00:00:00Z","consumer_count":0},"ts":"2026-11-22T04:11:17.020092562Z","did_crea'
    'te":true}'
)

STREAM_CREATE_WQ_SOURCE = json.loads(
    '{"type":"io.nats.jetstream.api.v1.stream_create_response","config":{"name":"WQ","subject'
    's":["wq.>"],"retention":"workqueue","max_consumers":-1,"max_msgs":-1,"max_bytes":-1,"max'
    '_age":0,"max_msgs_per_subject":-1,"max_msg_size":-1,"discard":"old","storage":"file","nu'
    'm_replicas":1,"sources":[{"name":"ORDERS","consumer":{"name":"wqsrc","deliver_subject":"'
    'deliver.wqsrc"}}],"compression":"none","allow_direct":false,"mirror_direct":false,"seale'
    'd":false,"deny_delete":false,"deny_purge":false,"allow_rollup_hdrs":false,"consumer_limi'
    'ts":{},"allow_msg_ttl":false,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.'
    'ver":"2.15.1"}},"created":"2026-11-22T04:11:17.03369196Z","state":{"messages":0,"bytes":'
    '0,"first_seq":0,"first_ts":"0001-01-01T00:00:00Z","last_seq":0,"last_ts":"0001-01-01T00:'
    '00:00Z","consumer_count":0},"sources":[{"name":"ORDERS","lag":0,"active":-1}],"ts":"2026'
    '-11-22T04:11:17.034526711Z","did_create":true}'
)

STREAM_INFO_SUBJECTS = json.loads(
    '{"type":"io.nats.jetstream.api.v1.stream_info_response","total":5,"offset":0,"limit":100'
    '000,"config":{"name":"ORDERS","description":"all orders","subjects":["orders.>"],"retent'
    'ion":"limits","max_consumers":-1,"max_msgs":-1,"max_bytes":-1,"max_age":86400000000000,"'
    'max_msgs_per_subject":100,"max_msg_size":-1,"discard":"old","storage":"file","num_replic'
    'as":1,"duplicate_window":60000000000,"compression":"s2","subject_transform":{"src":"orde'
    'rs.*.*","dest":"orders.{{wildcard(2)}}.{{wildcard(1)}}"},"republish":{"src":"orders.>","'
    'dest":"repub.orders.>","headers_only":true},"allow_direct":true,"mirror_direct":false,"s'
    'ealed":false,"deny_delete":false,"deny_purge":false,"allow_rollup_hdrs":true,"consumer_l'
    'imits":{"inactive_threshold":30000000000,"max_ack_pending":5000},"allow_msg_ttl":true,"s'
    'ubject_delete_marker_ttl":5000000000,"allow_atomic":true,"allow_msg_schedules":true,"all'
    'ow_batched":true,"metadata":{"_nats.level":"5","_nats.req.level":"4","_nats.ver":"2.15.1'
    '","owner":"team-a"}},"created":"2026-11-22T04:11:17.012439442Z","state":{"messages":7,"b'
    'ytes":599,"first_seq":1,"first_ts":"2026-11-22T04:11:17.015896047Z","last_seq":8,"last_t'
    's":"2026-11-22T04:11:17.02712705Z","num_subjects":5,"subjects":{"orders.0.eu":3,"orders.'
    '1.b":1,"orders.1.eu":1,"orders.2.b":1,"orders.y.x":1},"num_deleted":1,"deleted":[2],"con'
    'sumer_count":0},"cluster":{"leader":"single"},"ts":"2026-11-22T04:11:18.545498479Z"}'
)

CONSUMER_INFO_PINNED = json.loads(
    '{"type":"io.nats.jetstream.api.v1.consumer_info_response","stream_name":"ORDERS","name":'
    '"pin2","created":"2026-11-22T04:11:36.047542943Z","config":{"durable_name":"pin2","name"'
    ':"pin2","deliver_policy":"all","ack_policy":"explicit","ack_wait":30000000000,"max_deliv'
    'er":-1,"filter_subject":"orders.>","replay_policy":"instant","max_waiting":512,"max_ack_'
    'pending":5000,"inactive_threshold":10000000000,"num_replicas":0,"metadata":{"_nats.level'
    '":"5","_nats.req.level":"1","_nats.ver":"2.15.1"},"priority_groups":["jobs"],"priority_p'
    'olicy":"pinned_client","priority_timeout":120000000000},"delivered":{"consumer_seq":2,"s'
    'tream_seq":3,"last_active":"2026-11-22T04:11:36.049441543Z"},"ack_floor":{"consumer_seq"'
    ':0,"stream_seq":0},"num_ack_pending":2,"num_redelivered":0,"num_waiting":0,"num_pending"'
    ':5,"ts":"2026-11-22T04:11:36.05034239Z","priority_groups":[{"group":"jobs","pinned_clien'
    't_id":"ZQ6uI6QVseT38fc0IKVccL","pinned_ts":"2026-11-22T04:11:36.049326163Z"}]}'
)

CONSUMER_CREATE_PAUSED = json.loads(
    '{"type":"io.nats.jetstream.api.v1.consumer_create_response","stream_name":"ORDERS","name'
    '":"paused","created":"2026-11-22T04:11:20.552498977Z","config":{"name":"paused","deliver'
    '_policy":"by_start_time","opt_start_time":"2024-01-02T03:04:05.987654321Z","ack_policy":'
    '"all","ack_wait":30000000000,"max_deliver":-1,"filter_subject":"orders.>","replay_policy'
    '":"instant","max_waiting":512,"max_ack_pending":5000,"inactive_threshold":30000000000,"n'
    'um_replicas":0,"metadata":{"_nats.level":"5","_nats.req.level":"1","_nats.ver":"2.15.1"}'
    ',"pause_until":"2026-11-22T05:11:18.123456789Z","priority_groups":["a","b"],"priority_po'
    'licy":"overflow"},"delivered":{"consumer_seq":0,"stream_seq":0},"ack_floor":{"consumer_s'
    'eq":0,"stream_seq":0},"num_ack_pending":0,"num_redelivered":0,"num_waiting":0,"num_pendi'
    'ng":7,"paused":true,"pause_remaining":3597570277265,"ts":"2026-11-22T04:11:20.553178909Z'
    '","priority_groups":[{"group":"a","pinned_ts":"0001-01-01T00:00:00Z"}]}'
)

CONSUMER_CREATE_PUSH = json.loads(
    '{"type":"io.nats.jetstream.api.v1.consumer_create_response","stream_name":"ORDERS","name'
    '":"push","created":"2026-11-22T04:11:20.5553667Z","config":{"durable_name":"push","name"'
    ':"push","deliver_policy":"last_per_subject","ack_policy":"explicit","ack_wait":300000000'
    '00,"max_deliver":-1,"filter_subject":"orders.>","replay_policy":"original","rate_limit_b'
    'ps":1000000,"max_ack_pending":5000,"flow_control":true,"deliver_subject":"deliver.push",'
    '"deliver_group":"q","idle_heartbeat":5000000000,"inactive_threshold":30000000000,"num_re'
    'plicas":0,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.1"}},"de'
    'livered":{"consumer_seq":0,"stream_seq":3},"ack_floor":{"consumer_seq":0,"stream_seq":3}'
    ',"num_ack_pending":0,"num_redelivered":0,"num_waiting":0,"num_pending":5,"ts":"2026-11-2'
    '2T04:11:20.556386443Z"}'
)

CONSUMER_INFO_R3 = json.loads(
    '{"type":"io.nats.jetstream.api.v1.consumer_info_response","stream_name":"R3","name":"c3"'
    ',"created":"2026-11-22T04:11:20.644710541Z","config":{"durable_name":"c3","name":"c3","d'
    'eliver_policy":"all","ack_policy":"explicit","ack_wait":30000000000,"max_deliver":-1,"re'
    'play_policy":"instant","max_waiting":512,"max_ack_pending":1000,"num_replicas":0,"metada'
    'ta":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.1"}},"delivered":{"consum'
    'er_seq":0,"stream_seq":0},"ack_floor":{"consumer_seq":0,"stream_seq":0},"num_ack_pending'
    '":0,"num_redelivered":0,"num_waiting":0,"num_pending":3,"cluster":{"name":"C1","raft_gro'
    'up":"C-R3F-t9FYknSf","leader":"n1","leader_since":"2026-11-22T04:11:20.719491968Z","syst'
    'em_account":true,"traffic_account":"$SYS","replicas":[{"name":"n2","current":true,"activ'
    'e":1004679371,"peer":"44jzkV9D"},{"name":"n3","current":true,"active":1004042242,"peer":'
    '"BXScrY9i"}]},"ts":"2026-11-22T04:11:21.726287725Z"}'
)

CONSUMER_CREATE_FULL = json.loads(
    '{"type":"io.nats.jetstream.api.v1.consumer_create_response","stream_name":"ORDERS","name'
    '":"pinned","created":"2026-11-22T04:11:18.547632012Z","config":{"durable_name":"pinned",'
    '"name":"pinned","description":"pinned consumer","deliver_policy":"all","ack_policy":"exp'
    'licit","ack_wait":1000000000,"max_deliver":5,"backoff":[1000000000,5000000000,3000000000'
    '0],"filter_subjects":["orders.eu.>","orders.us.>"],"replay_policy":"instant","sample_fre'
    'q":"50%","max_waiting":100,"max_ack_pending":500,"max_batch":50,"max_expires":6000000000'
    '0,"max_bytes":1048576,"inactive_threshold":20000000000,"num_replicas":1,"mem_storage":tr'
    'ue,"metadata":{"_nats.level":"5","_nats.req.level":"1","_nats.ver":"2.15.1","app":"billi'
    'ng"},"priority_groups":["jobs"],"priority_policy":"pinned_client","priority_timeout":120'
    '000000000},"delivered":{"consumer_seq":0,"stream_seq":0},"ack_floor":{"consumer_seq":0,"'
    'stream_seq":0},"num_ack_pending":0,"num_redelivered":0,"num_waiting":0,"num_pending":0,"'
    'ts":"2026-11-22T04:11:18.547750187Z","priority_groups":[{"group":"jobs","pinned_ts":"000'
    '1-01-01T00:00:00Z"}]}'
)

ACCOUNT_INFO = json.loads(
    '{"type":"io.nats.jetstream.api.v1.account_info_response","memory":0,"storage":245,"reser'
    'ved_memory":0,"reserved_storage":0,"streams":1,"consumers":1,"limits":{"max_memory":-1,"'
    'max_storage":-1,"max_streams":-1,"max_consumers":-1,"max_ack_pending":-1,"memory_max_str'
    'eam_bytes":-1,"storage_max_stream_bytes":-1,"max_bytes_required":false},"domain":"hub","'
    'api":{"level":5,"total":4,"errors":0}}'
)

PUBACK_DUPLICATE = json.loads('{"stream":"ORDERS","seq":6,"duplicate":true}')

PUBACK_BATCH = json.loads('{"stream":"ORDERS","seq":8,"batch":"batch1","count":2}')

PUBACK_COUNTER = json.loads('{"stream":"COUNTERS","seq":100,"val":"5"}')

MSG_GET = json.loads(
    '{"type":"io.nats.jetstream.api.v1.stream_msg_get_response","message":{"subject":"orders.'
    '0.eu","seq":1,"hdrs":"TkFUUy8xLjANClgtSWQ6IDANCg0K","data":"aGVsbG8gMA==","time":"2026-1'
    '1-22T04:11:17.015896047Z"}}'
)

# Tiered limits come only from account JWTs; this follows server/jetstream.go's
# JetStreamAccountStats (totals without limits, one entry per tier).
ACCOUNT_INFO_TIERED = {
    "type": "io.nats.jetstream.api.v1.account_info_response",
    "memory": 0,
    "storage": 1024,
    "reserved_memory": 0,
    "reserved_storage": 0,
    "streams": 2,
    "consumers": 1,
    "limits": {
        "max_memory": 0,
        "max_storage": 0,
        "max_streams": 0,
        "max_consumers": 0,
        "max_ack_pending": 0,
        "memory_max_stream_bytes": 0,
        "storage_max_stream_bytes": 0,
        "max_bytes_required": False,
    },
    "domain": "hub",
    "api": {"level": 5, "total": 12, "errors": 1, "inflight": 2},
    "tiers": {
        "R1": {
            "memory": 0,
            "storage": 1024,
            "reserved_memory": 0,
            "reserved_storage": 1048576,
            "streams": 2,
            "consumers": 1,
            "limits": {
                "max_memory": 1048576,
                "max_storage": 10485760,
                "max_streams": 10,
                "max_consumers": 100,
                "max_ack_pending": -1,
                "memory_max_stream_bytes": -1,
                "storage_max_stream_bytes": -1,
                "max_bytes_required": True,
            },
        }
    },
}

# A stream moving to a new placement (2.15 "desired" cluster state), after
# server/stream.go's DesiredClusterInfo, with a lagging, offline peer.
STREAM_INFO_MOVING = {
    "config": {"name": "MOVING", "subjects": ["mv.>"], "num_replicas": 3},
    "created": "2026-11-22T04:11:20.563686459Z",
    "state": {
        "messages": 0,
        "bytes": 0,
        "first_seq": 0,
        "first_ts": "0001-01-01T00:00:00Z",
        "last_seq": 0,
        "last_ts": "0001-01-01T00:00:00Z",
        "consumer_count": 0,
        "lost": {"msgs": [4, 5], "bytes": 210},
    },
    "cluster": {
        "name": "C1",
        "leader": "n1",
        "replicas": [
            {
                "name": "n2",
                "current": False,
                "offline": True,
                "active": 0,
                "lag": 12,
                "peer": "44jzkV9D",
                "pending": True,
            },
        ],
        "desired": {
            "name": "C2",
            "replicas": [{"name": "m1", "current": False, "active": 0, "peer": "Zx9"}],
            "origin": {"replicas": 3, "placement": {"cluster": "C1"}, "retention": "limits"},
            "status": {"description": "waiting for catchup", "type": "catchup", "err": "slow"},
        },
    },
    "ts": "2026-11-22T04:11:22Z",
}

STREAM_INFOS = [
    STREAM_CREATE_ORDERS,
    STREAM_INFO_SOURCES,
    STREAM_INFO_MIRROR,
    STREAM_INFO_R3,
    STREAM_CREATE_COUNTERS,
    STREAM_CREATE_WQ_SOURCE,
    STREAM_INFO_SUBJECTS,
    STREAM_INFO_MOVING,
]
CONSUMER_INFOS = [
    CONSUMER_INFO_PINNED,
    CONSUMER_CREATE_PAUSED,
    CONSUMER_CREATE_PUSH,
    CONSUMER_INFO_R3,
    CONSUMER_CREATE_FULL,
]
ENVELOPE = {"type", "total", "offset", "limit", "did_create"}


def wire(reply: dict) -> dict:
    """A reply without its response envelope (what an info's to_api gives back)."""
    return {k: v for k, v in reply.items() if k not in ENVELOPE}


def all_samples() -> list[tuple[type, dict]]:
    """Every (class, wire JSON) pair above, envelopes stripped."""
    pairs: list[tuple[type, dict]] = []
    for reply in STREAM_INFOS:
        pairs.append((StreamInfo, wire(reply)))
        pairs.append((StreamConfig, reply["config"]))
    for reply in CONSUMER_INFOS:
        pairs.append((ConsumerInfo, wire(reply)))
        pairs.append((ConsumerConfig, reply["config"]))
    for reply in (ACCOUNT_INFO, ACCOUNT_INFO_TIERED):
        pairs.append((AccountInfo, wire(reply)))
    for ack in (PUBACK_DUPLICATE, PUBACK_BATCH, PUBACK_COUNTER):
        pairs.append((PubAck, ack))
    pairs.append((RawStreamMsg, MSG_GET["message"]))
    return pairs


SAMPLES = all_samples()
SAMPLE_IDS = [f"{cls.__name__}-{i}" for i, (cls, _) in enumerate(SAMPLES)]


# --------------------------------------------------------------------------
# Round trips.


@pytest.mark.parametrize(("cls", "data"), SAMPLES, ids=SAMPLE_IDS)
def test_wire_round_trip_is_exact(cls, data):
    """to_api(from_api(wire)) gives back the server's JSON key for key."""
    assert cls.from_api(data).to_api() == data


@pytest.mark.parametrize(("cls", "data"), SAMPLES, ids=SAMPLE_IDS)
def test_object_round_trip_is_equal(cls, data):
    """from_api(to_api(x)) == x, and nothing lands in extra for known servers."""
    obj = cls.from_api(data)
    assert cls.from_api(obj.to_api()) == obj
    assert obj.extra == {}


@pytest.mark.parametrize(("cls", "data"), SAMPLES, ids=SAMPLE_IDS)
def test_pickle_round_trip(cls, data):
    """Every config and info pickles and unpickles equal (Spark ships them), and hashes."""
    obj = cls.from_api(data)
    copy = pickle.loads(pickle.dumps(obj))
    assert copy == obj
    assert copy.to_api() == obj.to_api()
    assert hash(copy) == hash(obj)


def test_handmade_configs_round_trip_and_pickle():
    """Configs built in Python survive to_api/from_api and pickle unchanged."""
    values = [
        StreamConfig(
            name="S",
            subjects=["a.>", "b"],
            max_age=1.5,
            placement=Placement(cluster="C", tags=["az:1"], preferred="n1"),
            sources=[
                StreamSource(
                    name="O",
                    opt_start_time=datetime(2024, 1, 2, tzinfo=UTC),
                    subject_transforms=[SubjectTransform(src="x.>", dest="y.>")],
                    external=ExternalStream(api="$JS.hub.API", deliver="dlv"),
                ),
                StreamSource(
                    name="W", consumer=StreamConsumerSource(name="c", deliver_subject="d.c")
                ),
            ],
            republish=Republish(src=">", dest="rp.>", headers_only=True),
            consumer_limits=StreamConsumerLimits(inactive_threshold=30.0, max_ack_pending=10),
            metadata={"owner": "me"},
            persist_mode=PersistMode.ASYNC,
        ),
        ConsumerConfig(
            durable_name="d",
            backoff=[0.5, 1, 2.25],
            pause_until=datetime(2030, 1, 1, tzinfo=UTC),
            priority_groups=["jobs"],
            priority_policy=PriorityPolicy.PINNED_CLIENT,
            priority_timeout=90,
        ),
        OrderedConsumerConfig(filter_subjects=["a"], max_reset_attempts=3, name_prefix="ord"),
    ]
    for value in values:
        assert type(value).from_api(value.to_api()) == value
        assert pickle.loads(pickle.dumps(value)) == value
        assert hash(value) == hash(pickle.loads(pickle.dumps(value)))


def test_stream_info_fields():
    """Infos expose typed values: UTC datetimes, float seconds, nested infos."""
    si = StreamInfo.from_api(STREAM_INFO_R3)
    assert si.config.name == "R3" and si.config.num_replicas == 3
    assert si.created == datetime(2026, 11, 22, 4, 11, 20, 563686, tzinfo=UTC)
    assert si.created.tzinfo is UTC and si.created.nanosecond == 459
    assert si.state.messages == 3 and si.state.consumer_count == 1
    assert si.state.subjects is None and si.state.deleted is None and si.state.num_deleted == 0
    assert si.cluster.leader == "n2" and si.cluster.system_account is True
    assert [p.name for p in si.cluster.replicas] == ["n1", "n3"]
    assert si.cluster.replicas[0].active == 0.166054712
    assert [a.name for a in si.alternates] == ["R3M", "R3"]
    assert si.domain == "hub"


def test_stream_state_empty_times_are_none():
    """Go's zero time ("never") reads as None and is written back as zero time."""
    state = StreamInfo.from_api(STREAM_CREATE_ORDERS).state
    assert state.first_ts is None and state.last_ts is None
    assert state.to_api()["first_ts"] == "0001-01-01T00:00:00Z"


def test_stream_state_subjects_and_deleted():
    """subjects is a dict subject -> count and deleted a tuple of sequences, when asked for."""
    state = StreamInfo.from_api(STREAM_INFO_SUBJECTS).state
    assert state.subjects["orders.0.eu"] == 3 and state.num_subjects == 5
    assert state.deleted == (2,) and state.num_deleted == 1


def test_stream_source_infos():
    """Mirror and source infos carry lag, 'never active' as None, errors, externals."""
    si = StreamInfo.from_api(STREAM_INFO_SOURCES)
    local, remote = si.sources
    assert local.active is None and local.lag == 0
    assert isinstance(local.error.to_error(), Exception) and local.error.err_code == 10082
    assert remote.external == ExternalStream(api="$JS.other.API", deliver="deliver.other")
    assert remote.subject_transforms == (SubjectTransform(src="x.>", dest="y.>"),)
    assert si.config.sources[0].opt_start_time.rfc3339() == "2024-01-02T03:04:05.123456789Z"
    mirror = StreamInfo.from_api(STREAM_INFO_MIRROR)
    assert mirror.mirror.name == "ORDERS" and mirror.config.mirror.opt_start_seq == 2


def test_cluster_desired_state_and_lost_data():
    """2.15's desired placement, peer flags and lost data are typed."""
    si = StreamInfo.from_api(STREAM_INFO_MOVING)
    peer = si.cluster.replicas[0]
    assert (peer.offline, peer.lag, peer.pending) == (True, 12, True)
    desired = si.cluster.desired
    assert desired.status.type is MigrationStatusType.CATCHUP
    assert desired.origin.retention is RetentionPolicy.LIMITS
    assert desired.origin.placement == Placement(cluster="C1")
    assert si.state.lost.msgs == (4, 5)


def test_consumer_info_fields():
    """Consumer infos: sequences, priority groups with pin ids, pause state."""
    ci = ConsumerInfo.from_api(CONSUMER_INFO_PINNED)
    assert ci.delivered.stream_seq == 3 and ci.delivered.last_active.tzinfo is UTC
    assert ci.ack_floor.last_active is None
    group = ci.priority_groups[0]
    assert group.pinned_client_id == "ZQ6uI6QVseT38fc0IKVccL" and group.pinned_ts is not None
    assert ci.config.priority_policy is PriorityPolicy.PINNED_CLIENT
    assert ci.config.priority_timeout == 120.0
    paused = ConsumerInfo.from_api(CONSUMER_CREATE_PAUSED)
    assert paused.paused is True and paused.pause_remaining == 3597.570277265
    assert paused.priority_groups[0].pinned_ts is None
    assert paused.config.pause_until.rfc3339() == "2026-11-22T05:11:18.123456789Z"
    assert not ConsumerInfo.from_api(CONSUMER_CREATE_PUSH).paused
    assert ConsumerInfo.from_api(CONSUMER_INFO_R3).cluster.raft_group == "C-R3F-t9FYknSf"


def test_account_info_fields():
    """Account info: usage, limits, API level, and tiers when limits are tiered."""
    ai = AccountInfo.from_api(ACCOUNT_INFO)
    assert ai.api.level == 5 and ai.limits.max_streams == -1 and ai.domain == "hub"
    assert ai.tiers is None
    tiered = AccountInfo.from_api(ACCOUNT_INFO_TIERED)
    assert tiered.tiers["R1"].limits.max_bytes_required is True
    assert tiered.api.inflight == 2


def test_pub_acks():
    """PubAck reads duplicates, atomic batches (batch/count) and counter values."""
    assert PubAck.from_api(PUBACK_DUPLICATE) == PubAck(stream="ORDERS", seq=6, duplicate=True)
    batch = PubAck.from_api(PUBACK_BATCH)
    assert (batch.batch_id, batch.batch_size, batch.duplicate) == ("batch1", 2, False)
    assert PubAck.from_api(PUBACK_COUNTER).val == "5"
    assert PubAck(stream="S", seq=1).to_api() == {"stream": "S", "seq": 1}


def test_raw_stream_msg():
    """A message get reply decodes base64 data and headers and keeps exact nanoseconds."""
    msg = RawStreamMsg.from_api(MSG_GET["message"])
    assert msg.subject == "orders.0.eu" and msg.seq == 1 and msg.data == b"hello 0"
    assert isinstance(msg.headers, Headers) and msg.headers["X-Id"] == "0"
    assert msg.time_ns == 1795320677015896047
    assert msg.time == datetime(2026, 11, 22, 4, 11, 17, 15896, tzinfo=UTC)
    bare = RawStreamMsg(subject="a", seq=2, data=b"", headers=None, time=None)
    assert bare.time_ns is None and bare.to_api() == {"subject": "a", "seq": 2}


def test_api_error_info_becomes_the_registered_error():
    """An error inside an info converts to the APIError subclass of its err_code."""
    err = APIErrorInfo(code=404, err_code=10059, description="stream not found").to_error()
    assert isinstance(err, StreamNotFoundError) and err.err_code == 10059


# --------------------------------------------------------------------------
# None omitted; seconds <-> nanoseconds; timestamps.


def test_none_fields_are_omitted():
    """Only the fields set go on the wire (ack_policy defaults to explicit, as in nats.go)."""
    assert StreamConfig(name="S").to_api() == {"name": "S"}
    assert ConsumerConfig().to_api() == {"ack_policy": "explicit"}
    assert ConsumerConfig(ack_policy=None).to_api() == {}
    assert StreamConfig(name="S", sealed=False, max_msgs=0).to_api() == {
        "name": "S",
        "sealed": False,
        "max_msgs": 0,
    }
    assert StreamConsumerLimits().to_api() == {}


def test_durations_convert_to_exact_nanoseconds():
    """Float seconds become integer nanoseconds exactly as written."""
    cfg = StreamConfig(name="S", max_age=31536000.001, duplicate_window=0.1)
    assert cfg.to_api()["max_age"] == 31536000001000000
    assert cfg.to_api()["duplicate_window"] == 100000000
    cc = ConsumerConfig(ack_wait=30, backoff=[1, 2.5, timedelta(milliseconds=1500)])
    assert cc.ack_wait == 30.0 and isinstance(cc.ack_wait, float)
    assert cc.to_api()["backoff"] == [1000000000, 2500000000, 1500000000]
    assert ConsumerConfig.from_api({"ack_wait": 1}).ack_wait == 1e-9


def test_from_api_keeps_an_absent_ack_policy_absent():
    """ack_policy defaults to explicit for users, but JSON without it stays without it."""
    assert ConsumerConfig.from_api({}).ack_policy is None
    assert ConsumerConfig.from_api({"name": "c"}).to_api() == {"name": "c"}


@given(st.integers(min_value=0, max_value=2**52))
def test_nanoseconds_survive_float_seconds(ns):
    """Any nanosecond count the server sends below 2**52 comes back unchanged."""
    assert seconds_to_ns(ns_to_seconds(ns)) == ns


@given(st.integers(min_value=0, max_value=100 * 365 * 86400 * 1000))
def test_whole_milliseconds_survive_float_seconds(ms):
    """Durations in whole milliseconds up to a century come back unchanged."""
    ns = ms * 1_000_000
    assert seconds_to_ns(ns_to_seconds(ns)) == ns


@given(st.integers(min_value=0, max_value=4102444800 * 10**9))
def test_timestamps_keep_nanoseconds(ns):
    """RFC 3339 formatting and parsing keep every nanosecond."""
    dt = datetime_from_ns(ns)
    assert parse_rfc3339(format_rfc3339(dt)).epoch_ns == ns


def test_rfc3339_forms():
    """Go's RFC3339Nano form: trailing zeros dropped; offsets converted to UTC."""
    assert format_rfc3339(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)) == "2026-01-02T03:04:05Z"
    assert format_rfc3339(datetime(2026, 1, 2, 3, 4, 5, 100000, tzinfo=UTC)) == (
        "2026-01-02T03:04:05.1Z"
    )
    east = timezone(timedelta(hours=2))
    assert format_rfc3339(datetime(2026, 1, 2, 3, 4, 5, tzinfo=east)) == "2026-01-02T01:04:05Z"
    assert parse_rfc3339("2024-01-02T04:04:05.5+01:00").rfc3339() == "2024-01-02T03:04:05.5Z"
    with pytest.raises(ValueError):
        parse_rfc3339("yesterday")


@given(st.integers(min_value=0, max_value=4102444800 * 10**9), st.integers(0, 9))
def test_the_servers_form_reads_as_the_general_form(ns, digits):
    """A "...Z" timestamp (the fast path, read again from memory the second time) gives
    what the general RFC 3339 reader gives for the same instant written with an offset."""
    dt = datetime_from_ns(ns - ns % 10 ** (9 - digits))
    fraction = f".{dt.epoch_ns % 10**9:09d}"[: digits + 1] if digits else ""
    text = dt.strftime("%Y-%m-%dT%H:%M:%S") + fraction + "Z"
    general = parse_rfc3339(text[:-1] + "+00:00")
    for value in (parse_rfc3339(text), parse_rfc3339(text)):
        assert type(value) is NanoDatetime and value.tzinfo is UTC
        assert value == general and value.epoch_ns == general.epoch_ns == dt.epoch_ns


@pytest.mark.parametrize(
    "text", ["2026-02-30T00:00:00Z", "2026-13-01T00:00:00Z", "2026-01-01T24:00:00Z"]
)
def test_impossible_dates_are_refused(text):
    """A well-formed timestamp of a date that does not exist raises ValueError."""
    with pytest.raises(ValueError):
        parse_rfc3339(text)
    with pytest.raises(ValueError):
        parse_rfc3339(text[:-1] + "+00:00")


def test_nano_datetime_behaves_like_a_datetime():
    """NanoDatetime compares as a datetime, keeps ns through arithmetic, pickles exactly."""
    dt = parse_rfc3339("2026-11-22T04:04:35.123456789Z")
    assert isinstance(dt, datetime) and dt.nanosecond == 789
    assert dt == datetime(2026, 11, 22, 4, 4, 35, 123456, tzinfo=UTC)
    assert (dt + timedelta(seconds=1)).rfc3339() == "2026-11-22T04:04:36.123456789Z"
    assert (dt - timedelta(days=1)).nanosecond == 789
    assert dt.replace(nanosecond=1).rfc3339() == "2026-11-22T04:04:35.123456001Z"
    assert pickle.loads(pickle.dumps(dt)).epoch_ns == dt.epoch_ns
    assert repr(dt) == "NanoDatetime('2026-11-22T04:04:35.123456789Z')"


def test_config_times_keep_nanoseconds_for_updates():
    """A start time read from the server is sent back to the nanosecond (updates need it)."""
    cfg = ConsumerInfo.from_api(CONSUMER_CREATE_PAUSED).config
    assert cfg.to_api()["opt_start_time"] == "2024-01-02T03:04:05.987654321Z"


def test_config_times_read_with_an_offset_go_back_as_they_came():
    """A time the server reported with another client's UTC offset is sent back in that
    text (the server compares a mirror's config offset and all); a changed value in UTC."""
    wire = {"name": "M", "mirror": {"name": "O", "opt_start_time": "2025-01-01T02:00:00.5+02:00"}}
    cfg = StreamConfig.from_api(wire)
    assert cfg.to_api()["mirror"]["opt_start_time"] == "2025-01-01T02:00:00.5+02:00"
    assert cfg.mirror.opt_start_time.rfc3339() == "2025-01-01T00:00:00.5Z"
    moved = attrs.evolve(cfg.mirror, opt_start_time=cfg.mirror.opt_start_time + timedelta(0))
    assert moved.to_api()["opt_start_time"] == "2025-01-01T00:00:00.5Z"
    for copied in (pickle.loads(pickle.dumps(cfg)), copy.deepcopy(cfg)):
        assert copied.to_api()["mirror"]["opt_start_time"] == "2025-01-01T02:00:00.5+02:00"


@pytest.mark.parametrize("ns", [365 * 86400 * 10**9 + 1, 2**62 + 1, 2**52 + 1])
def test_durations_a_float_cannot_hold_go_back_exact(ns):
    """A duration past float precision reads as seconds and is sent back to the
    nanosecond, through a changed config too; arithmetic on it gives a plain float."""
    cfg = StreamConfig.from_api({"name": "S", "max_age": ns, "duplicate_window": ns})
    assert cfg.max_age == ns / 10**9
    assert attrs.evolve(cfg, max_msgs=10).to_api()["max_age"] == ns
    assert seconds_to_ns(pickle.loads(pickle.dumps(cfg.max_age))) == ns
    assert type(cfg.max_age + 0) is float


def test_config_times_must_be_aware_and_become_utc():
    """Naive datetimes are refused; aware ones are stored in UTC."""
    with pytest.raises(ValueError, match="^opt_start_time:"):
        ConsumerConfig(deliver_policy="by_start_time", opt_start_time=datetime(2024, 1, 1))
    east = timezone(timedelta(hours=2))
    cc = ConsumerConfig(
        deliver_policy="by_start_time", opt_start_time=datetime(2024, 1, 1, 2, tzinfo=east)
    )
    assert cc.opt_start_time.tzinfo is UTC and cc.opt_start_time.hour == 0
    assert cc.to_api()["opt_start_time"] == "2024-01-01T00:00:00Z"


# --------------------------------------------------------------------------
# Enums.


@pytest.mark.parametrize(
    ("member", "value"),
    [
        (RetentionPolicy.LIMITS, "limits"),
        (RetentionPolicy.INTEREST, "interest"),
        (RetentionPolicy.WORK_QUEUE, "workqueue"),
        (StorageType.FILE, "file"),
        (StorageType.MEMORY, "memory"),
        (DiscardPolicy.OLD, "old"),
        (DiscardPolicy.NEW, "new"),
        (DeliverPolicy.ALL, "all"),
        (DeliverPolicy.LAST, "last"),
        (DeliverPolicy.NEW, "new"),
        (DeliverPolicy.BY_START_SEQUENCE, "by_start_sequence"),
        (DeliverPolicy.BY_START_TIME, "by_start_time"),
        (DeliverPolicy.LAST_PER_SUBJECT, "last_per_subject"),
        (AckPolicy.NONE, "none"),
        (AckPolicy.ALL, "all"),
        (AckPolicy.EXPLICIT, "explicit"),
        (AckPolicy.FLOW_CONTROL, "flow_control"),
        (ReplayPolicy.INSTANT, "instant"),
        (ReplayPolicy.ORIGINAL, "original"),
        (StoreCompression.NONE, "none"),
        (StoreCompression.S2, "s2"),
        (PriorityPolicy.NONE, "none"),
        (PriorityPolicy.OVERFLOW, "overflow"),
        (PriorityPolicy.PINNED_CLIENT, "pinned_client"),
        (PriorityPolicy.PRIORITIZED, "prioritized"),
        (PersistMode.DEFAULT, "default"),
        (PersistMode.ASYNC, "async"),
    ],
)
def test_enum_values_are_wire_strings(member, value):
    """Each enum member is the server's string, and is a str."""
    assert member.value == value and member == value and isinstance(member, str)
    assert type(member)(value) is member


def test_configs_accept_enum_strings():
    """A config takes the wire string for an enum field and stores the member."""
    cfg = StreamConfig(name="S", retention="workqueue", storage="memory", compression="s2")
    assert cfg.retention is RetentionPolicy.WORK_QUEUE and cfg.storage is StorageType.MEMORY
    with pytest.raises(ValueError, match="^retention: 'work_queue' is not one of"):
        StreamConfig(name="S", retention="work_queue")


# --------------------------------------------------------------------------
# Checks at construction.

BAD_STREAMS = [
    ({"name": ""}, "name"),
    ({"name": "a b"}, "name"),
    ({"name": "a.b"}, "name"),
    ({"name": "a*"}, "name"),
    ({"name": "a>"}, "name"),
    ({"name": "a/b"}, "name"),
    ({"name": "x" * 256}, "name"),
    ({"description": "x" * 4097}, "description"),
    ({"num_replicas": 6}, "num_replicas"),
    ({"num_replicas": -1}, "num_replicas"),
    ({"max_msgs": -2}, "max_msgs"),
    ({"max_bytes": -5}, "max_bytes"),
    ({"max_consumers": -2}, "max_consumers"),
    ({"max_msg_size": 2**31}, "max_msg_size"),
    ({"max_age": -1.0}, "max_age"),
    ({"max_age": 0.05}, "max_age"),
    ({"duplicate_window": 0.01}, "duplicate_window"),
    ({"max_age": 10.0, "duplicate_window": 20.0}, "duplicate_window"),
    ({"subject_delete_marker_ttl": 0.5}, "subject_delete_marker_ttl"),
    ({"subjects": ["a..b"]}, "subjects"),
    ({"subjects": ["a.>.b"]}, "subjects"),
    ({"subjects": ["a", "a"]}, "subjects"),
    ({"subjects": ["ok", "has space"]}, "subjects"),
    ({"metadata": {"k": "v" * (128 * 1024)}}, "metadata"),
    ({"mirror": StreamSource(name="O"), "subjects": ["x"]}, "subjects"),
    ({"mirror": StreamSource(name="O"), "sources": [StreamSource(name="P")]}, "sources"),
    ({"deny_purge": True, "allow_rollup_hdrs": True}, "allow_rollup_hdrs"),
    ({"discard_new_per_subject": True, "max_msgs_per_subject": 1}, "discard_new_per_subject"),
    ({"allow_msg_counter": True, "allow_msg_ttl": True}, "allow_msg_counter"),
    ({"allow_msg_counter": True, "retention": "interest"}, "allow_msg_counter"),
    ({"persist_mode": "async", "storage": "memory"}, "persist_mode"),
    ({"persist_mode": "async", "num_replicas": 3}, "persist_mode"),
    ({"first_seq": -1}, "first_seq"),
]


@pytest.mark.parametrize(("fields", "name"), BAD_STREAMS)
def test_bad_stream_configs_raise_naming_the_field(fields, name):
    """The server's own rules, checked before anything is sent."""
    fields = {"name": "S", **fields}
    with pytest.raises(ValueError, match=f"^{name}(:| is too long)"):
        StreamConfig(**fields)


BAD_CONSUMERS = [
    ({"name": "a.b"}, "name"),
    ({"durable_name": "has space"}, "durable_name"),
    ({"name": "a", "durable_name": "b"}, "durable_name"),
    ({"filter_subject": "a", "filter_subjects": ["b"]}, "filter_subjects"),
    ({"filter_subjects": ["a.>", "a.>"]}, "filter_subjects"),
    ({"filter_subject": "a..b"}, "filter_subject"),
    ({"opt_start_seq": 5}, "opt_start_seq"),
    ({"deliver_policy": "by_start_sequence"}, "deliver_policy"),
    ({"deliver_policy": "by_start_time"}, "deliver_policy"),
    ({"deliver_policy": "last_per_subject"}, "deliver_policy"),
    ({"opt_start_time": datetime(2024, 1, 1, tzinfo=UTC)}, "opt_start_time"),
    ({"ack_wait": -1}, "ack_wait"),
    ({"backoff": [1, -2]}, "backoff"),
    ({"backoff": [1, 2, 3], "max_deliver": 2}, "backoff"),
    ({"max_deliver": -2}, "max_deliver"),
    ({"max_ack_pending": -2}, "max_ack_pending"),
    ({"num_replicas": 6}, "num_replicas"),
    ({"sample_freq": "half"}, "sample_freq"),
    ({"idle_heartbeat": 5.0}, "idle_heartbeat"),
    ({"flow_control": True, "deliver_subject": "d"}, "flow_control"),
    ({"rate_limit_bps": 10}, "rate_limit_bps"),
    ({"max_expires": 0.0001}, "max_expires"),
    ({"deliver_subject": "d.*"}, "deliver_subject"),
    ({"deliver_subject": "d", "max_waiting": 5}, "max_waiting"),
    ({"deliver_subject": "d", "idle_heartbeat": 0.05}, "idle_heartbeat"),
    ({"priority_groups": ["g"]}, "priority_groups"),
    ({"priority_policy": "pinned_client"}, "priority_policy"),
    ({"priority_policy": "overflow", "priority_groups": ["way-too-long-name"]}, "priority_groups"),
    (
        {"priority_policy": "overflow", "priority_groups": ["g"], "deliver_subject": "d"},
        "priority_policy",
    ),
    ({"priority_timeout": 5.0}, "priority_timeout"),
    ({"description": "x" * 4097}, "description"),
    ({"direct": True}, "direct"),
    ({"ack_policy": "flow_control"}, "ack_policy"),
]


@pytest.mark.parametrize(("fields", "name"), BAD_CONSUMERS)
def test_bad_consumer_configs_raise_naming_the_field(fields, name):
    """The server's own rules, checked before anything is sent."""
    with pytest.raises(ValueError, match=f"^{name}:"):
        ConsumerConfig(**fields)


@pytest.mark.parametrize(
    ("cls", "fields", "name"),
    [
        (StreamConfig, {"name": 5}, "name"),
        (StreamConfig, {"name": "S", "subjects": "a.b"}, "subjects"),
        (StreamConfig, {"name": "S", "max_msgs": 1.5}, "max_msgs"),
        (StreamConfig, {"name": "S", "max_msgs": True}, "max_msgs"),
        (StreamConfig, {"name": "S", "max_age": "1h"}, "max_age"),
        (StreamConfig, {"name": "S", "placement": {"cluster": "C"}}, "placement"),
        (StreamConfig, {"name": "S", "metadata": {"k": 1}}, "metadata"),
        (ConsumerConfig, {"opt_start_time": "2024-01-01T00:00:00Z"}, "opt_start_time"),
        (ConsumerConfig, {"backoff": [1, "2"]}, "backoff"),
    ],
)
def test_wrong_types_raise_type_error_naming_the_field(cls, fields, name):
    """A value of the wrong type is a TypeError that names the field."""
    with pytest.raises(TypeError, match=f"^{name}:"):
        cls(**fields)


def test_nested_values_are_checked():
    """Nested values check their own fields when built."""
    with pytest.raises(ValueError, match="^api:"):
        ExternalStream(api="$JS.*.API")
    with pytest.raises(ValueError, match="^deliver:"):
        ExternalStream(api="$JS.hub.API", deliver="bad subject")
    with pytest.raises(ValueError, match="^subject_transforms:"):
        StreamSource(
            name="O", filter_subject="a", subject_transforms=[SubjectTransform(src="a", dest="b")]
        )
    with pytest.raises(ValueError, match="^consumer:"):
        StreamSource(
            name="O", opt_start_seq=3, consumer=StreamConsumerSource(name="c", deliver_subject="d")
        )
    with pytest.raises(ValueError, match="^deliver_subject:"):
        StreamConsumerSource(name="c", deliver_subject="d.>")
    with pytest.raises(ValueError, match="^dest:"):
        Republish(dest="")
    with pytest.raises(ValueError, match="^name:"):
        StreamSource(name="a.b")


def test_required_fields():
    """Names and the like are required: missing is a TypeError, None a ValueError."""
    with pytest.raises(TypeError, match="name"):
        StreamConfig()
    with pytest.raises(ValueError, match="^name: is required"):
        StreamConfig(name=None)
    with pytest.raises(TypeError, match="dest"):
        SubjectTransform(src="a")
    assert SubjectTransform.from_api({"src": "a"}).dest is None


def test_non_finite_durations_are_refused():
    """NaN and infinite seconds are refused."""
    with pytest.raises(ValueError, match="^max_age:"):
        StreamConfig(name="S", max_age=float("nan"))
    with pytest.raises(ValueError, match="^ack_wait:"):
        ConsumerConfig(ack_wait=float("inf"))


def test_good_configs_pass():
    """Valid edge values are accepted."""
    StreamConfig(name="S", max_msgs=-1, max_age=0, num_replicas=0, subjects=["a.*", ">"])
    StreamConfig(name="S", max_age=0.1, duplicate_window=0.1, subject_delete_marker_ttl=1)
    ConsumerConfig(deliver_policy="last_per_subject", filter_subjects=["a.>"])
    ConsumerConfig(deliver_subject="d", flow_control=True, idle_heartbeat=1, rate_limit_bps=8)
    ConsumerConfig(priority_policy="overflow", priority_groups=["a/b_c=d-1"])


def test_from_api_trusts_the_server():
    """Server JSON is not re-checked, so a newer server's rules never break reading."""
    cfg = StreamConfig.from_api({"name": "odd.name", "num_replicas": 7, "max_age": 1})
    assert cfg.name == "odd.name" and cfg.num_replicas == 7
    with pytest.raises(ValueError, match="^name:"):
        StreamConfig(name="odd.name")


# --------------------------------------------------------------------------
# Unknown keys and values.


def test_unknown_keys_are_kept_and_sent_back():
    """Keys a newer server adds survive from_api -> to_api, nested ones too."""
    data = dict(STREAM_CREATE_ORDERS["config"])
    data["future_flag"] = True
    data["future_obj"] = {"x": [1, 2]}
    data["republish"] = {**data["republish"], "future_sub": "y"}
    cfg = StreamConfig.from_api(data)
    assert cfg.extra == {"future_flag": True, "future_obj": {"x": [1, 2]}}
    assert cfg.republish.extra == {"future_sub": "y"}
    assert cfg.to_api() == data
    assert cfg != StreamConfig.from_api(STREAM_CREATE_ORDERS["config"])


def test_unknown_enum_values_are_kept_and_sent_back():
    """An enum value this client lacks leaves the field None and round-trips raw."""
    data = {"name": "S", "retention": "someday", "storage": "file"}
    cfg = StreamConfig.from_api(data)
    assert cfg.retention is None and cfg.extra == {"retention": "someday"}
    assert cfg.to_api() == data


def test_extra_sends_fields_this_client_lacks():
    """Setting extra sends a field by hand; typed fields win on a clash."""
    cfg = StreamConfig(name="S", extra={"new_thing": 1, "name": "ignored"})
    assert cfg.to_api() == {"name": "S", "new_thing": 1}


def test_envelope_keys_are_dropped_from_infos():
    """Response envelope keys (type, paging, did_create) are not kept as extras."""
    si = StreamInfo.from_api(STREAM_INFO_SUBJECTS)
    assert si.extra == {} and "total" not in si.to_api()
    assert AccountInfo.from_api(ACCOUNT_INFO).extra == {}


# --------------------------------------------------------------------------
# Metadata, equality and config_matches.


def test_equality_ignores_server_metadata():
    """_nats.* keys the server adds do not make configs differ."""
    served = StreamConfig.from_api(STREAM_CREATE_ORDERS["config"])
    mine = attrs.evolve(served, metadata={"owner": "team-a"})
    assert served == mine
    assert served != attrs.evolve(served, metadata={"owner": "team-b"})
    assert served.metadata["_nats.ver"] == "2.15.1"


def test_config_matches_a_requested_stream():
    """What was asked for matches what the server made of it."""
    served = StreamInfo.from_api(STREAM_CREATE_ORDERS).config
    asked = StreamConfig(
        name="ORDERS",
        subjects=["orders.>"],
        description="all orders",
        max_age=86400,
        max_msgs=0,
        num_replicas=0,
        no_ack=False,
        duplicate_window=60,
        compression="s2",
        metadata={"owner": "team-a"},
        consumer_limits=StreamConsumerLimits(inactive_threshold=30, max_ack_pending=5000),
        placement=Placement(),
        persist_mode=PersistMode.DEFAULT,
    )
    assert asked != served
    assert config_matches(asked, served)
    assert not config_matches(attrs.evolve(asked, max_msgs=10), served)
    assert not config_matches(attrs.evolve(asked, metadata={"owner": "x"}), served)
    assert not config_matches(attrs.evolve(asked, extra={"allow_direct": False}), served)
    assert config_matches(attrs.evolve(asked, extra={"allow_direct": True}), served)
    assert not config_matches(asked, ConsumerConfig())


def test_config_matches_a_requested_consumer():
    """Server-derived consumer fields (ack_wait from backoff, defaults) still match."""
    served = ConsumerInfo.from_api(CONSUMER_INFO_PINNED).config
    asked = ConsumerConfig(
        durable_name="pin2",
        filter_subject="orders.>",
        priority_groups=["jobs"],
        priority_policy="pinned_client",
        inactive_threshold=10,
        ack_wait=0,
    )
    assert config_matches(asked, served)
    assert not config_matches(attrs.evolve(asked, filter_subject="other"), served)
    full = ConsumerInfo.from_api(CONSUMER_CREATE_FULL).config
    assert full.ack_wait == 1.0  # the server took backoff[0]
    assert config_matches(
        ConsumerConfig(durable_name="pinned", ack_wait=30, backoff=[1, 5, 30], max_deliver=5),
        full,
    )


# --------------------------------------------------------------------------
# merge_config.


def test_merge_config_rules():
    """No fields: the config itself; no config: cls(**fields); both: evolve."""
    base = StreamConfig(name="S", subjects=["a"])
    assert merge_config(StreamConfig, base, {}) is base
    assert merge_config(StreamConfig, None, {"name": "T"}) == StreamConfig(name="T")
    merged = merge_config(StreamConfig, base, {"max_msgs": 5})
    assert merged == StreamConfig(name="S", subjects=["a"], max_msgs=5)
    assert merge_config(ConsumerConfig, None, {}) == ConsumerConfig()


def test_merge_config_refuses_unknown_fields_and_bad_values():
    """Unknown names are a TypeError naming them; values are checked again."""
    with pytest.raises(TypeError, match="'max_mesages'"):
        merge_config(StreamConfig, None, {"name": "S", "max_mesages": 1})
    with pytest.raises(TypeError, match="StreamConfig"):
        merge_config(StreamConfig, ConsumerConfig(), {})
    with pytest.raises(ValueError, match="^num_replicas:"):
        merge_config(StreamConfig, StreamConfig(name="S"), {"num_replicas": 9})


# --------------------------------------------------------------------------
# Ordered consumers.


def test_ordered_first_link_follows_deliver_policy():
    """The first link starts where deliver_policy says, as an R1 memory ack-none consumer."""
    occ = OrderedConsumerConfig(filter_subjects=["a.>"], headers_only=True, metadata={"m": "1"})
    first = occ.consumer_config("ord_1")
    assert first == ConsumerConfig(
        name="ord_1",
        deliver_policy=DeliverPolicy.ALL,
        ack_policy=AckPolicy.NONE,
        filter_subject="a.>",
        inactive_threshold=300.0,
        num_replicas=1,
        mem_storage=True,
        headers_only=True,
        metadata={"m": "1"},
    )
    by_seq = OrderedConsumerConfig(deliver_policy="by_start_sequence", opt_start_seq=7)
    assert by_seq.consumer_config("o_1").opt_start_seq == 7
    start = datetime(2024, 1, 1, tzinfo=UTC)
    by_time = OrderedConsumerConfig(deliver_policy="by_start_time", opt_start_time=start)
    assert by_time.consumer_config("o_1").opt_start_time == start
    lps = OrderedConsumerConfig(deliver_policy="last_per_subject").consumer_config("o_1")
    assert lps.filter_subject == ">"


def test_ordered_later_links_resume_at_a_sequence():
    """A recreated link starts by sequence, whatever the original policy."""
    occ = OrderedConsumerConfig(
        filter_subjects=["a", "b"],
        deliver_policy="new",
        inactive_threshold=30,
        replay_policy="original",
    )
    link = occ.consumer_config("ord_2", next_seq=42)
    assert link.deliver_policy is DeliverPolicy.BY_START_SEQUENCE and link.opt_start_seq == 42
    assert link.filter_subjects == ("a", "b") and link.filter_subject is None
    assert link.inactive_threshold == 30.0 and link.replay_policy is ReplayPolicy.ORIGINAL


def test_ordered_config_checks():
    """The ordered config checks its start position and reset limit."""
    with pytest.raises(ValueError, match="^deliver_policy:"):
        OrderedConsumerConfig(deliver_policy="by_start_sequence")
    with pytest.raises(ValueError, match="^max_reset_attempts:"):
        OrderedConsumerConfig(max_reset_attempts=0)
    with pytest.raises(ValueError, match="^name_prefix:"):
        OrderedConsumerConfig(name_prefix="a.b")


# --------------------------------------------------------------------------
# Every public class.

PUBLIC_CLASSES = [
    cls
    for module in (stream_config, consumer_config, info)
    for cls in (getattr(module, name) for name in module.__all__)
    if attrs.has(cls)
]


@pytest.mark.parametrize("cls", PUBLIC_CLASSES, ids=lambda c: c.__name__)
def test_every_class_is_frozen_keyword_only_and_documented(cls):
    """Frozen, keyword-only, with every field listed under Attributes: in the docstring."""
    params = attrs.fields(cls)
    assert all(a.kw_only for a in params)
    assert "Attributes:" in cls.__doc__
    for a in params:
        assert f"    {a.name}:" in cls.__doc__, a.name
    sample = next((cls.from_api(d) for c, d in SAMPLES if c is cls), None)
    if sample is not None:
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            sample.extra = {}  # type: ignore[misc]


def test_enums_module_exports_str_enums():
    """Every enum is a str enum."""
    for name in enums.__all__:
        assert issubclass(getattr(enums, name), str)


def test_repr_shows_only_what_is_set():
    """The repr lists the fields that differ from their defaults."""
    cfg = StreamConfig(name="S", retention="interest", subjects=["a"])
    assert repr(cfg) == (
        "StreamConfig(name='S', subjects=('a',), retention=RetentionPolicy.INTEREST)"
    )
    assert repr(ClusterInfo()) == "ClusterInfo()"
