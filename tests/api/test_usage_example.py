"""The usage example handed to the lead for the README, as it is written there, works."""

from __future__ import annotations

from typing import Annotated, Literal

import pytest
from kube_structural import problems
from pydantic import Field

from memop.runtime import (
    Cel,
    CustomResource,
    IntOrString,
    InvalidObject,
    LabelValue,
    ListType,
    Model,
    PrinterColumn,
    Quantity,
    Status,
)


class Port(Model):
    """A port the app serves."""

    name: str
    port: int = Field(ge=1, le=65535)


@Cel("self.minReplicas <= self.replicas", message="replicas must not be below minReplicas")
class WebAppSpec(Model):
    """What the user wants."""

    image: str = Field(min_length=1)
    """The container image."""
    replicas: int = Field(default=2, ge=0)
    min_replicas: int = Field(default=1, ge=0)
    memory: Quantity = Quantity("256Mi")
    max_unavailable: IntOrString = "25%"
    tier: Literal["web", "worker"] = "web"
    labels: dict[str, LabelValue] = {}
    ports: Annotated[list[Port], ListType("map", keys=("name",))] = []


class WebAppStatus(Status):
    ready_replicas: int = 0


class WebApp(
    CustomResource,
    group="apps.example.com",
    version="v1",
    short_names=("wa",),
    printer_columns=[PrinterColumn("Ready", ".status.readyReplicas", "integer")],
):
    """A web application."""

    spec: WebAppSpec
    status: WebAppStatus = WebAppStatus()


def test_the_example() -> None:
    crd = WebApp.crd()
    assert problems(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]) == []
    assert crd["metadata"]["name"] == "webapps.apps.example.com"
    spec_schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec_schema["properties"]["image"]["description"] == "The container image."
    assert spec_schema["x-kubernetes-validations"][0]["rule"] == "self.minReplicas <= self.replicas"
    assert spec_schema["required"] == ["image"]

    app = WebApp.parse(
        {"metadata": {"name": "shop", "namespace": "prod"}, "spec": {"image": "shop:1", "memory": "1Gi"}}
    )
    assert (app.name, app.spec.replicas, app.spec.memory.value()) == ("shop", 2, 2**30)
    assert app.to_dict()["spec"]["maxUnavailable"] == "25%"
    assert WebApp.resource().plural == "webapps"

    with pytest.raises(
        InvalidObject, match=r"spec.replicas: Invalid value: -1: spec.replicas in body should be greater"
    ):
        WebApp.parse({"metadata": {"name": "x"}, "spec": {"image": "a", "replicas": -1}})
