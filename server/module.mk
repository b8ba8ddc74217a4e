# server/module.mk: `rung serve` (server/), its Python client and its test stages.


# build/rung-serve: `rung serve` as its own program (the same code the CLI dispatches to).
$(B)/rung-serve: $(call obj,server/main-serve.c $(SERVER)) $(B)/librung.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
all: $(B)/rung-serve
$(B)/check_rung: | $(B)/rung-serve

# The Python client's unittest suite, against a real daemon the tests start.
check-python: $(B)/rung-serve
	cd clients/python && RUNG_BUILD_DIR=$(CURDIR)/$(B) python3 -m unittest discover -s tests -v
CHECK_STAGES += check-python

# Bounded load test: 50 concurrent clients doing exec (LOAD_SECONDS, default 10 in CI).
LOAD_SECONDS ?= 10
check-load: $(B)/rung-serve
	RUNG_BUILD_DIR=$(CURDIR)/$(B) python3 bench/serve_load.py --clients 50 --seconds $(LOAD_SECONDS)
CHECK_STAGES += check-load

.PHONY: check-python check-load
