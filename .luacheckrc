-- luacheck configuration (Debian's lua-check). `make lint` runs
--   luacheck lua bin/qoslab examples spec
-- (bin/qoslab has no .lua extension, so it is named); `make test` counts it
-- as the suite "lint".
std = 'lua54'
-- The code's own limit: lines fit in 120 columns (most stay near 100).
max_line_length = 120

-- A to-be-closed handle held only for its scope (`local srv <close> =
-- qoslab.server{...}`: closed when the scope ends) is its use; luacheck 1.1
-- reports it as an unused variable (211). Ignored by name in the files that
-- hold such handles, nowhere else.
local close_handles = { '211/srv' }

-- Plans (examples/, `qoslab run FILE`) see the globals qoslab.cli.plan sets:
-- `qoslab` (the module) and `QOSLAB_RUN` (file, out, resume, quick, backend,
-- args).
files['examples'] = {
  read_globals = { 'qoslab', 'QOSLAB_RUN' },
  ignore = close_handles,
}
files['lua/qoslab/demo.lua'] = { ignore = close_handles }

files['spec'] = {
  std = '+busted',
  -- Specs quote expected output, patterns and commands on one line, where a
  -- break would hide the text being matched.
  max_line_length = 160,
}
files['spec/integration/plan_testbed_spec.lua'] = { ignore = close_handles }
files['spec/netem/traffic_live_slots_spec.lua'] = { ignore = close_handles }
files['spec/regress/021-udp-connect-junk_spec.lua'] = { ignore = close_handles }
files['spec/regress/022-tcp-server-ends-byte-test_spec.lua'] = { ignore = close_handles }
-- netem scopes held open for a block (`local g <close> = netem.scope(...)`).
files['spec/netem/netem_spec.lua'] = { ignore = { '211/g' } }
-- Captures what the command writes to stderr by replacing io.stderr.
files['spec/unit/cli_netem_spec.lua'] = { globals = { io = { fields = { stderr = {} } } } }
