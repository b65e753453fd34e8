# The two commands of the README. Both create .venv with the project installed when it is missing, at the exact
# versions of requirements.lock (a constraints file: the editable install and its extras resolve as before, each
# package at its locked version). `make lock` refreshes the lock after a change of pyproject.toml's dependencies (keeping every pin it can;
# `make lock UPGRADE=1` moves every package to the newest version its bounds allow).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
LOCK_TOOL := .lock-tool

$(BIN)/shopbot: pyproject.toml requirements.lock
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c requirements.lock -e '.[test]'
	touch $(BIN)/shopbot

# One lock for every platform and Python from 3.11 (this machine's 3.11, the image's 3.12), written by uv.
lock:
	test -x $(LOCK_TOOL)/bin/uv || ($(PYTHON) -m venv $(LOCK_TOOL) && $(LOCK_TOOL)/bin/pip install --quiet 'uv>=0.13,<0.14')
	$(LOCK_TOOL)/bin/uv pip compile pyproject.toml --extra test --extra models --extra postgres --universal \
		--python-version 3.11 --no-annotate $(if $(UPGRADE),--upgrade,) --custom-compile-command 'make lock' -o requirements.lock

.PHONY: demo test lock
demo: $(BIN)/shopbot
	$(BIN)/shopbot demo

test: $(BIN)/shopbot
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m pytest
