# The two commands of the README. Both create .venv with the project installed when it is missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

$(BIN)/shopbot: pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(BIN)/shopbot

.PHONY: demo test
demo: $(BIN)/shopbot
	$(BIN)/shopbot demo

test: $(BIN)/shopbot
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m pytest
