-- 010: every finished test left its sockets open. The server kept a
-- finished test (for Server:results()) together with its control and data
-- sockets, and the client closed its sockets only when the Test object was
-- garbage-collected: each test added CLOSE-WAIT connections (3 for a
-- 2-stream TCP test) until the process ran out of descriptors. Found by a
-- new user watching `ss` while a server ran for a while.
local traffic = require 'qoslab.traffic'

local function self_pid()
  local f = assert(io.open('/proc/self/stat'))
  local p = f:read('l'):match('^(%d+)')
  f:close()
  return p
end

-- Socket descriptors this process holds.
local function sockets()
  local p = assert(io.popen('ls -l /proc/' .. self_pid() .. '/fd 2>/dev/null'))
  local n = 0
  for l in p:lines() do if l:find('socket:', 1, true) then n = n + 1 end end
  p:close()
  return n
end

describe('regress 010: sockets of finished tests are closed', function()
  it('on both ends, TCP and UDP, while the server keeps running', function()
    local srv <close> = assert(traffic.server { port = 0 })
    local port = srv:port()
    local base = sockets()
    for _, o in ipairs { { parallel = 2 }, { proto = 'udp', bitrate_bps = 1e6 },
                         { parallel = 3, reverse = true }, {} } do
      o.host, o.port, o.duration_s = '127.0.0.1', port, 0.3
      assert(traffic.run(o))
      -- The server publishes its result before the client's wait returns; its
      -- sockets close right after. Give it a moment, then count exactly.
      local deadline = require('qoslab.timer').now() + 2
      while sockets() ~= base and require('qoslab.timer').now() < deadline do
        require('qoslab.timer').sleep(0.02)
      end
      assert.equal(base, sockets(), 'sockets left after a test: ' .. require('cjson').encode(o))
    end
    assert.equal(4, #srv:results())
  end)
end)
