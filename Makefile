# The PyTorch book. `make setup` once, then `make lab` to learn, `make test` to check everything.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: setup lab book test outputs lint clean

setup:  ## create .venv and install everything (torch, Jupyter, the site tools, utils/)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	$(BIN)/pip install -r requirements.txt

lab:  ## open JupyterLab on the notebooks
	$(BIN)/jupyter lab notebooks/

book:  ## build the website into _build/html (stored outputs, no re-execution; warnings are errors)
	$(BIN)/jupyter-book build --all -W --keep-going .

test:  ## unit tests, strict nbval over every notebook, notebook hygiene, the site build
	$(BIN)/pytest --nbval --nbval-current-env --nbval-sanitize-with nbval.cfg

outputs:  ## re-execute every notebook in place on a fresh kernel (NB=notebooks/05_*.ipynb for one)
	$(BIN)/python -m utils.maintain outputs $(NB)

lint:
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

clean:
	rm -rf _build student
