-- 005: a client that failed after its parameters reached the server (first
-- seen with TCP_CONGESTION "nosuchcc" on its data socket; a qoslab client
-- now checks the congestion name and bind_device before it connects, so
-- here a scripted peer sends its cookie and parameters and closes at
-- CREATE_STREAMS) closed its control connection, but the server went on
-- waiting for the data connections for the whole connect timeout (10 s):
-- the test showed as running and its socket sat in CLOSE-WAIT. The server
-- now notices the hang-up at once and counts the connection as rejected.
local H = require 'integration.traffic_helper'
local traffic = require 'qoslab.traffic'

local has_python = H.sh('python3 -c "import socket"')

describe('regress 005 client gone before its data connections', function()
  if not has_python then
    pending('needs python3')
    return
  end
  it('is rejected within a second, and the server serves the next test', function()
    local port = H.port()
    local srv = assert(traffic.server { port = port })
    local ok, err = pcall(function()
      -- cookie, parameters, CREATE_STREAMS, then the control connection closes
      local _, out = H.sh(string.format('python3 spec/support/hostile_peers.py slowlegit --port %d '
        .. '--src 127.0.0.1 --count 1 --gap 0 --seconds 5', port))
      assert.matches('"ok": 1', out, 1, true)
      local t0 = H.now()
      while srv:rejected() == 0 and H.now() - t0 < 5 do H.sleep(0.01) end
      local waited = H.now() - t0
      assert.equal(1, srv:rejected())
      assert(waited < 1, string.format('the server noticed after %.2f s', waited))
      assert.equal(0, srv:tests_running())
      local rej, failed, last = srv:problems()
      assert.equal(1, rej)
      assert.equal(0, failed)
      assert.matches('^control connection rejected from 127%.0%.0%.1 port %d+: client left after '
        .. 'opening 0 of 1 data connections', last)
      local ok2 = assert(traffic.run { host = '127.0.0.1', port = port, bytes = 1048576 })
      assert.equal(1048576, ok2.received.bytes)
      -- a client killed mid-test is a failed test for the server's log,
      -- not a rejected connection (a client's :stop() ends its test
      -- cleanly, with a result)
      -- (the client process is the plain build: a sanitizer build's module
      -- needs its runtime loaded first, which only our test host does)
      local pid = H.spawn(string.format(
        'exec env -u QOSLAB_BUILD bin/qoslab client 127.0.0.1 -p %d -t 5 -b 10M', port))
      local t1 = H.now()
      while srv:tests_running() == 0 and H.now() - t1 < 5 do H.sleep(0.02) end
      H.sleep(0.3)
      os.execute('kill -9 ' .. pid)
      t0 = H.now()
      while select(2, srv:problems()) == 0 and H.now() - t0 < 5 do H.sleep(0.01) end
      rej, failed, last = srv:problems()
      assert.equal(1, rej)
      assert.equal(1, failed)
      assert.matches('^test failed from 127%.0%.0%.1 port %d+: ', last)
      print('  [005] ' .. last)
    end)
    srv:stop()
    assert(ok, err)
  end)
end)
