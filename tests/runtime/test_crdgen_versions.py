"""crdgen builds a CRD of several versions (CrdVersion), and the one-version call is unchanged."""

from __future__ import annotations

import pytest

from memop.runtime.api import crdgen
from memop.runtime.api.crdgen import CrdNames, CrdVersion, printer_column

NAMES = CrdNames("example.com", "v1", "Widget", "widgets", "widget")
SCHEMA = crdgen.object_schema("A widget.", {"type": "object"}, {"type": "object"})
COLUMN = printer_column("Size", ".spec.size", "integer")


def test_one_version_as_before() -> None:
    crd = crdgen.custom_resource_definition(NAMES, SCHEMA, [COLUMN])
    assert crd["spec"]["versions"] == [
        {
            "additionalPrinterColumns": [COLUMN],
            "name": "v1",
            "schema": {"openAPIV3Schema": SCHEMA},
            "served": True,
            "storage": True,
            "subresources": {"status": {}},
        }
    ]
    assert crdgen.custom_resource_definition(NAMES, SCHEMA, [COLUMN], versions=()) == crd
    assert (
        crdgen.custom_resource_definition(NAMES, versions=[CrdVersion("v1", SCHEMA, [COLUMN], storage=True)])
        == crd
    )


def test_several_versions_in_order_each_its_own() -> None:
    wide = printer_column("Port", ".spec.port", "integer", priority=1)
    assert list(wide) == ["jsonPath", "name", "priority", "type"]  # sorted, as the YAML has them
    beta = crdgen.object_schema(
        "A widget.", {"type": "object", "properties": {"port": {"type": "integer"}}}, {}
    )
    crd = crdgen.custom_resource_definition(
        NAMES,
        versions=[
            CrdVersion("v1", SCHEMA, [COLUMN], storage=True),
            CrdVersion("v2beta1", beta, [COLUMN, wide]),
            CrdVersion("v1alpha1", SCHEMA, served=False),
        ],
    )
    versions = crd["spec"]["versions"]
    assert [(v["name"], v["served"], v["storage"]) for v in versions] == [
        ("v1", True, True),
        ("v2beta1", True, False),
        ("v1alpha1", False, False),
    ]
    assert versions[1]["schema"]["openAPIV3Schema"] == beta
    assert versions[1]["additionalPrinterColumns"] == [COLUMN, wide]
    assert versions[2]["additionalPrinterColumns"] == []
    assert "conversion" not in crd["spec"]
    # Fresh: changing the result changes no declaration.
    versions[0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["type"] = "string"
    assert SCHEMA["properties"]["spec"] == {"type": "object"}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "either a schema or versions"),
        (
            {"schema": SCHEMA, "versions": [CrdVersion("v1", SCHEMA, storage=True)]},
            "either a schema or versions",
        ),
        (
            {"versions": [CrdVersion("v1", SCHEMA, storage=True)], "printer_columns": [COLUMN]},
            "each of the versions",
        ),
        ({"versions": [CrdVersion("v1", SCHEMA)]}, "exactly one version must be stored, v1"),
        (
            {"versions": [CrdVersion("v1", SCHEMA, storage=True), CrdVersion("v2", SCHEMA, storage=True)]},
            "stored",
        ),
        ({"versions": [CrdVersion("v2", SCHEMA, storage=True)]}, r"v1 \(CrdNames.version\), not \['v2'\]"),
        ({"versions": [CrdVersion("v1", SCHEMA, storage=True), CrdVersion("v1", SCHEMA)]}, "listed twice"),
        ({"versions": [CrdVersion("v1", SCHEMA, storage=True, served=False)]}, "no version is served"),
    ],
)
def test_inconsistent_versions_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        crdgen.custom_resource_definition(NAMES, **kwargs)  # type: ignore[arg-type]
