# The PyTorch book. `make setup` once, then `make lab` to learn, `make test` to check everything.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: setup lab book report test outputs student publish lint clean

setup:  ## create .venv and install everything (torch, Jupyter, the site tools, utils/)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	$(BIN)/pip install -r requirements.txt

lab:  ## open JupyterLab on the notebooks
	$(BIN)/jupyter lab notebooks/

book: report  ## build the website into _build/html (stored outputs, no re-execution; warnings are errors)
	$(BIN)/jupyter-book build --all -W --keep-going .

report:  ## write book/run_report.md from the notebooks' recorded runs and `headline` outputs
	$(BIN)/python -m utils.maintain report

test:  ## unit tests, strict nbval over every notebook, notebook hygiene, the site build
	$(BIN)/pytest --nbval --nbval-current-env --nbval-sanitize-with nbval.cfg

outputs:  ## re-execute every notebook in place on a fresh kernel (NB=notebooks/05_*.ipynb for one)
	$(BIN)/python -m utils.maintain outputs $(NB)

student:  ## write student copies of the notebooks into student/ (exercise solutions replaced by stubs)
	$(BIN)/python -m utils.maintain student

# Instructors: `make book publish` pushes _build/html to the gh-pages branch of REMOTE
# (a remote name or URL; then serve GitHub Pages from that branch).
REMOTE ?= origin
publish:  ## push the built site to the gh-pages branch of $(REMOTE) (run `make book` first)
	$(BIN)/python -m utils.maintain publish --remote $(REMOTE)

lint:
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

clean:
	rm -rf _build student
