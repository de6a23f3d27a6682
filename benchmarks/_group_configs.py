"""Group configs set through the admin API (KIP-848 and KIP-932 groups keep their settings on
the broker): what the share-group tests, the soak and the share benchmark set before a member
joins."""

from __future__ import annotations

from typing import Any

__all__ = ["set_group_configs"]


def set_group_configs(servers: str, groups: list[str], configs: dict[str, Any]) -> None:
    """Set share-group configs (share.auto.offset.reset, share.record.lock.duration.ms, ...)."""
    from confluent_kafka.admin import (  # not at import: the benchmarks run without confluent
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
    )

    admin = AdminClient({"bootstrap.servers": servers})
    resources = [
        ConfigResource(ConfigResource.Type.GROUP, group, incremental_configs=[
            ConfigEntry(key, str(value), incremental_operation=AlterConfigOpType.SET)
            for key, value in configs.items()])
        for group in groups
    ]
    for future in admin.incremental_alter_configs(resources).values():
        future.result(30)
