-- A Server or Test method called with '.' instead of ':' (srv.port(),
-- h.wait()) failed inside qoslab with "attempt to index a nil value (local
-- 'self')", and a method of a stopped server raised "the server was
-- closed" at a line of qoslab's own server module. Each now names the
-- method and what it expected, at the caller's line.
local traffic = require 'qoslab.traffic'

local THIS = 'traffic_methods_spec.lua'

-- The message of f() called from the line after the call to `raised`.
local function raised(f)
  local line = debug.getinfo(2, 'l').currentline
  local ok, err = pcall(f)
  assert.is_false(ok)
  return tostring(err), line
end

describe('traffic methods', function()
  local srv
  before_each(function() srv = assert(traffic.server { port = 0, bind_address = '127.0.0.1' }) end)
  after_each(function() if srv then srv:stop() end end)

  it('a Server method called with a dot names the method, at the caller', function()
    local err, line = raised(function() local v = srv.port() return v end)
    assert.equal(THIS .. ':' .. line .. ': qoslab.Server:port: expected a qoslab.Server as self '
      .. '(call it as srv:port(...)), got nil', err:match('[^/]*' .. THIS:gsub('%.', '%%.') .. ':.*$'))
    err = raised(function() local v = srv.limits({}) return v end)
    assert.matches('qoslab.Server:limits: expected a qoslab.Server as self', err, 1, true)
    err = raised(function() local v = srv.wait_results() return v end)
    assert.matches('qoslab.Server:wait_results: expected a qoslab.Server as self', err, 1, true)
    err = raised(function() local v = srv.stop(42) return v end)
    assert.matches('qoslab.Server:stop: expected a qoslab.Server as self (call it as srv:stop()), got number',
      err, 1, true)
  end)

  it('a stopped server raises "closed" at the caller, with every value of a live one', function()
    assert.is_true(srv:port() > 0)
    local n, last = srv:started()
    assert.equal(0, n); assert.is_nil(last)
    local rejected, failed, last_problem, log = srv:problems()
    assert.equal(0, rejected); assert.equal(0, failed); assert.is_nil(last_problem)
    assert.equal('table', type(log))
    srv:stop()
    assert.is_true(srv:done())
    for _, m in ipairs { 'port', 'limits', 'finished', 'rejected', 'wait_results' } do
      local err, line = raised(function() local v = srv[m](srv) return v end)
      assert.equal(THIS .. ':' .. line .. ': qoslab.Server: the server was closed',
        err:match('[^/]*' .. THIS:gsub('%.', '%%.') .. ':.*$'), m)
    end
  end)

  it('a Test method called with a dot names the method, at the caller', function()
    local h = traffic.client { host = '127.0.0.1', port = srv:port(), duration_s = 1 }
    local err, line = raised(function() local v = h.start() return v end)
    assert.equal(THIS .. ':' .. line .. ': qoslab.Test:start: expected a qoslab.Test as self '
      .. '(call it as h:start(...)), got nil', err:match('[^/]*' .. THIS:gsub('%.', '%%.') .. ':.*$'))
    assert(h:start())
    for _, m in ipairs { 'wait', 'stop', 'intervals', 'close' } do
      err = raised(function() local v = h[m]({}) return v end)
      assert.matches('qoslab.Test:' .. m .. ': expected a qoslab.Test as self', err, 1, true)
    end
    assert(h:wait())
  end)
end)
