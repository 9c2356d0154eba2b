"""The scenario reference documents every key and every kind the schema accepts."""

import typing
from pathlib import Path

from pydantic import BaseModel

from netsim.registry import REGISTRY
from netsim.scenario.schema import Scenario

README = Path(__file__).resolve().parents[1] / "scenarios" / "README.md"


def models_and_tags(model: type[BaseModel], seen: set) -> None:
    if model in seen:
        return
    seen.add(model)
    for field in model.model_fields.values():
        stack = [field.annotation]
        while stack:
            annotation = stack.pop()
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                models_and_tags(annotation, seen)
            else:
                stack.extend(typing.get_args(annotation))


def test_every_key_and_kind_is_documented():
    text = README.read_text(encoding="utf-8")
    models: set = set()
    models_and_tags(Scenario, models)
    # every built-in component, including those named by kind (their configs are not in the
    # Scenario's annotations, which take any registered config)
    for slot, name, _, origin in REGISTRY.entries():
        if origin == "netsim":
            models_and_tags(REGISTRY.lookup((slot,), name)[1], models)
    for entry in REGISTRY.sections().values():  # the sections' own configs
        models_and_tags(entry.cls.Config, models)
    assert len(models) > 20
    missing = []
    for model in models:
        for name, field in model.model_fields.items():
            key = field.alias or name
            if name in ("kind", "dist"):
                for tag in typing.get_args(field.annotation):
                    if f"`{tag}`" not in text:
                        missing.append(f"{model.__name__}.{name} = {tag}")
            elif f"`{key}`" not in text:
                missing.append(f"{model.__name__}.{key}")
    assert not missing, f"undocumented in scenarios/README.md: {sorted(missing)}"


def test_the_readme_opens_with_the_two_commands():
    readme = (README.parents[1] / "README.md").read_text(encoding="utf-8")
    blocks = readme.split("```")
    commands = [blocks[i].strip() for i in range(1, len(blocks), 2)][:2]
    assert "netsim run scenarios/quickstart.yaml" in commands[0]
    assert "pip install" in commands[0]
    assert "pip install" in commands[1] and "[test]" in commands[1] and "pytest" in commands[1]
    ci = (README.parents[1] / ".ci" / "run").read_text(encoding="utf-8")
    assert "pytest" in ci and "[test]" in ci


def test_license_and_citation_agree_with_the_package_metadata():
    import tomllib

    import yaml

    root = README.parents[1]
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    citation = yaml.safe_load((root / "CITATION.cff").read_text(encoding="utf-8"))
    assert (root / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")
    assert project["license"]["text"] == citation["license"] == "MIT"
    assert str(citation["version"]) == project["version"]
    # every paper netsim implements is cited (docs/papers.md names them)
    titles = {reference["title"] for reference in citation["references"]}
    assert "Robust Decentralized Differentially Private Stochastic Gradient Descent" in titles
    assert "Differentially Private Distributed Online Learning" in titles
    assert "Mutual-Information-Private Online Gradient Descent Algorithm" in titles
    # the import name is netsim; the distribution is not the unrelated "netsim" of the index
    from netsim import DISTRIBUTION

    assert project["name"] == DISTRIBUTION != "netsim"
