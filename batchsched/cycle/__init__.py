"""The workload cycle: one pure decision per workload (a lone pod or a gang).

`schedule_workload(handle, workload)` takes the snapshot (through a small handle) and returns a
decision value: Bind, Wait, Preempt or Reject. Quota admission, gang quorum, backfill holds and
preemption are policies at its extension points. No I/O and no asyncio here: the live runtime,
the simulators and `batchsched place` act on the decision.
"""
