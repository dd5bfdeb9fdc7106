"""dsh_sched: the batch scheduler of dsh-trio.

Runs the tool calls of one assistant message on a ``dsh_tools.ToolRuntime``: parallel-safe
calls in a bounded rolling pool, every other call alone, exactly one result per call
committed in model order, and cancellation turned into well-defined results. Drives every
call through ``dsh_tools.lowlevel`` only.
"""

from ._batch import DEFAULT_MAX_PARALLEL, Batch, open_batch, run_tool_calls
from ._calls import ModelToolCall, parse_arguments
from ._outcome import BatchOutcome, BatchStatistics, CommittedCall
from ._session_log import JsonlSessionLog, LoggedCall, read_session_log
from ._sinks import CallCommitted, CallStarted, ContextAccepted, RecordingSink, Sink

__all__ = [
    "DEFAULT_MAX_PARALLEL",
    "Batch",
    "BatchOutcome",
    "BatchStatistics",
    "CallCommitted",
    "CallStarted",
    "CommittedCall",
    "ContextAccepted",
    "JsonlSessionLog",
    "LoggedCall",
    "ModelToolCall",
    "RecordingSink",
    "Sink",
    "open_batch",
    "parse_arguments",
    "read_session_log",
    "run_tool_calls",
]
