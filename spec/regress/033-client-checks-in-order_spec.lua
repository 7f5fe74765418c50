-- 033: a traffic client checked what this host refuses only after it had
-- connected, or not at all. `bind_device = 'nosuchdev'` with no server gave
-- ECONNREFUSED (the control socket's SO_BINDTODEVICE failure was ignored;
-- ENODEV came from a data stream, once a server existed); a UDP latency
-- probe to a port where nothing listens gave EPROTONOSUPPORT, advising
-- `proto = "icmp"`; `qoslab client -A 99` printed "Connecting to host"
-- and exited 1. Now the device, the namespace and the CPUs are checked
-- before anything connects (`qoslab.traffic.check_host`, and first in a
-- test's start), a UDP probe whose port is closed and whose TCP connection
-- is refused says ECONNREFUSED, and a CPU of -A this process may not run
-- on is bad input of the command (exit 2, before connecting).
local H = require 'integration.traffic_helper'
local traffic = require 'qoslab.traffic'

-- A port where nothing listens (a server's, closed again).
local function closed_port()
  local srv = assert(traffic.server { port = 0, bind_address = '127.0.0.1' })
  local port = srv:port()
  srv:stop()
  return port
end

describe('regress 033 client checks in order', function()
  it('a missing bind_device is ENODEV whether a server listens or not, before the probe', function()
    local port = closed_port()
    local res, msg, code = traffic.run { host = '127.0.0.1', port = port, bind_device = 'nosuchdev' }
    assert.is_nil(res)
    assert.equal('ENODEV', code)
    assert.equal('bind_device "nosuchdev": no such device in this namespace (see ip link)', msg)
    res, msg, code = traffic.run { host = '127.0.0.1', port = port, bind_device = 'nosuchdev',
      probe = true }
    assert.is_nil(res)
    assert.equal('ENODEV', code, msg)
    local srv <close> = assert(traffic.server { port = 0, bind_address = '127.0.0.1' })
    res, msg, code = traffic.run { host = '127.0.0.1', port = srv:port(), bind_device = 'nosuchdev',
      duration_s = 0.2 }
    assert.is_nil(res)
    assert.equal('ENODEV', code, msg)
    assert.same({ nil, 'bind_device "nosuchdev": no such device in this namespace (see ip link)',
      'ENODEV', 'opts.bind_device' }, { traffic.check_host { host = 'x', bind_device = 'nosuchdev' } })
    assert.is_true(traffic.check_host { host = 'x', bind_device = 'lo' })
  end)

  it('a UDP probe where nothing listens is ECONNREFUSED, not EPROTONOSUPPORT', function()
    local port = closed_port()
    for _, probe in ipairs { true, { proto = 'udp' }, { proto = 'tcp' } } do
      local res, msg, code = traffic.run { host = '127.0.0.1', port = port, probe = probe }
      assert.is_nil(res)
      assert.equal('ECONNREFUSED', code, msg)
      assert.is_nil(msg:find('icmp', 1, true), msg)
    end
  end)

  it('a CPU this process may not run on: EINVAL at start, before any connection', function()
    local port = closed_port()
    local res, msg, code = traffic.run { host = '127.0.0.1', port = port, cpu_affinity = 1023 }
    assert.is_nil(res)
    assert.equal('EINVAL', code)
    assert.matches('^opts%.cpu_affinity: CPU 1023 is not one this process may run on', msg)
    local _, _, _, field = traffic.check_host { host = 'x', cpu_affinity = { 0, 1023 } }
    assert.equal('opts.cpu_affinity', field)
  end)

  it('qoslab client -A with such a CPU: exit 2 naming -A, nothing connected', function()
    local port = closed_port()
    local out = H.tmp('033-client')
    local p = io.popen(string.format('env -u QOSLAB_BUILD lua5.4 bin/qoslab client 127.0.0.1 -p %d -A 1023 2>%s; echo "rc=$?"',
      port, H.q(out)))
    local stdout = p:read('a')
    p:close()
    local err = H.read(out)
    assert.matches('rc=2\n$', stdout)
    assert.is_nil(stdout:find('Connecting', 1, true), stdout)
    assert.matches('^qoslab client: %-A %(cpu_affinity%): CPU 1023 is not one this process may run on', err)
    H.cleanup_tmp()
  end)
end)
