"""Replica copy and move tasks with the reference's shapes, over the C calls
(``mc_store_create_copy_task`` / ``mc_store_create_move_task`` / ``mc_store_query_task``).

Task ids are the reference's UUID tuples ``(hi, lo)``; a failed create answers ``((0, 0), code)``
and a failed query ``(None, code)``.
"""

import enum


class TaskType(enum.IntEnum):
    """What a task does (the reference's numbers)."""

    REPLICA_COPY = 0
    REPLICA_MOVE = 1


class TaskStatus(enum.IntEnum):
    """Where a task is (the reference's numbers)."""

    PENDING = 0
    PROCESSING = 1
    FAILED = 2
    SUCCESS = 3


class QueryTaskResponse:
    """A task's state as ``query_task`` reports it. Times are Unix epoch milliseconds;
    ``assigned_client`` is the id (a UUID tuple) of the client that runs the task."""

    __slots__ = ("id", "type", "status", "created_at_ms_epoch", "last_updated_at_ms_epoch",
                 "assigned_client", "message")

    def __init__(self, id, type, status, created_at_ms_epoch, last_updated_at_ms_epoch,
                 assigned_client, message):
        self.id = id
        self.type = TaskType(type)
        self.status = TaskStatus(status)
        self.created_at_ms_epoch = created_at_ms_epoch
        self.last_updated_at_ms_epoch = last_updated_at_ms_epoch
        self.assigned_client = assigned_client
        self.message = message

    def __repr__(self):
        return (f"QueryTaskResponse(id={self.id}, type={int(self.type)}, "
                f"status={int(self.status)}, created_at={self.created_at_ms_epoch}, "
                f"last_updated_at={self.last_updated_at_ms_epoch}, "
                f"assigned_client={self.assigned_client}, message={self.message!r})")


def _targets(targets):
    if isinstance(targets, (str, bytes)):
        raise TypeError("targets must be a list of segment names, not a single string")
    return list(targets)


def create_copy_task(self, key, targets):
    """Copies the object to the target segments (names as ``get_hostname()`` gives them).
    Returns ``(task_id, 0)``, or ``((0, 0), code)``: OBJECT_NOT_FOUND (-704), INVALID_PARAMS
    (-600: an unknown segment, no targets, more than 8 replicas), OBJECT_HAS_REPLICATION_TASK
    (-708). The copy runs on the client that owns a replica; poll ``query_task``."""
    hi, lo, code = self._create_task_raw(int(TaskType.REPLICA_COPY), key, None, _targets(targets))
    return (hi, lo), code


def create_move_task(self, key, source, target):
    """Moves the object's replica on segment ``source`` to segment ``target``. Returns as
    ``create_copy_task``; INVALID_PARAMS also when source holds no replica or equals target."""
    hi, lo, code = self._create_task_raw(int(TaskType.REPLICA_MOVE), key, source, [target])
    return (hi, lo), code


def query_task(self, task_id):
    """``(QueryTaskResponse, 0)``, or ``(None, code)``: TASK_NOT_FOUND (-1400)."""
    try:
        hi, lo = task_id
    except (TypeError, ValueError):
        raise TypeError(f"task_id must be a (hi, lo) tuple, not {task_id!r}") from None
    code, ttype, status, created, updated, chi, clo, msg = self._query_task_raw(hi, lo)
    if code != 0:
        return None, code
    return QueryTaskResponse((hi, lo), ttype, status, created, updated, (chi, clo), msg), 0


def attach(cls):
    for fn in (create_copy_task, create_move_task, query_task):
        setattr(cls, fn.__name__, fn)
