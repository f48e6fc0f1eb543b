"""The types of the replica copy and move tasks (the reference's numbers and shapes); the task
methods (create_copy_task, create_move_task, query_task) are in ``_methods.py``."""

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
