-- 029: when a server-side check failed a running test without a limit's
-- message (here: the client fell silent past the test time and the
-- server's idle_timeout_s), the server closed the control connection
-- with nothing said, and a close with the client's bytes unread became a
-- reset that could also destroy a message still waiting for a
-- retransmission on a lossy path. The client could only say "peer closed
-- the control connection". Now the server sends SERVER_TERMINATE with its
-- reason, then closes after a FIN and reading what the client still
-- sends: the client reports the server's reason. The client here is a
-- `qoslab client` process stopped with SIGSTOP after its test started and
-- continued after the server gave up.
local H = require 'integration.traffic_helper'
local traffic = require 'qoslab.traffic'

describe('regress 029 a server-side failure of a running test', function()
  teardown(function() H.cleanup_tmp() end)

  it('reaches the client as the server\'s reason, not as a closed connection', function()
    local port = H.port()
    local srv <close> = assert(traffic.server { port = port, bind_address = '127.0.0.1',
      idle_timeout_s = 1 })
    local out = H.tmp('029-client')
    -- the plain build: a sanitizer build's module loads only into the suites'
    -- own Lua host, not into bin/qoslab
    local pid = H.spawn(string.format('exec env -u QOSLAB_BUILD lua5.4 bin/qoslab client 127.0.0.1 -p %d -t 1 -b 10M',
      port), out .. '.out', out .. '.err')
    local ok, err = pcall(function()
      local t0 = H.now()
      while srv:tests_running() < 1 and H.now() - t0 < 10 do H.sleep(0.02) end
      assert.equal(1, srv:tests_running(), H.read(out .. '.err'))
      H.sleep(0.2)
      H.must('kill -STOP ' .. pid)
      -- the server gives up 1 s (its idle_timeout_s) after the 1 s test time
      local t1 = H.now()
      while srv:tests_running() > 0 and H.now() - t1 < 10 do H.sleep(0.05) end
      assert.equal(0, srv:tests_running())
      H.sleep(0.8)   -- past the server's 500 ms wait for the connection's end
      H.must('kill -CONT ' .. pid)
      assert(H.wait_exit(pid, 15), 'client still running')
    end)
    if not ok then
      os.execute('kill -CONT ' .. pid .. ' 2>/dev/null; kill ' .. pid .. ' 2>/dev/null')
      error(err, 0)
    end
    local said = H.read(out .. '.err') or ''
    assert.matches('server terminated the test: client silent after the test time', said, 1, true)
    assert.is_nil(said:find('peer closed the control connection', 1, true), said)
    local _, failed, last = srv:problems()
    assert.equal(1, failed)
    assert.matches('client silent after the test time', last, 1, true)
  end)
end)
