-- qoslab.hosts without a network: the command-line values (--host-map,
-- --ssh-option), the mapping, the sum and table of a clients run, and the
-- flags of `qoslab run` (bad values name the flag; QOSLAB_RUN.hosts; a plan
-- with --host-map stays on this host). The runs over ssh are in
-- spec/integration/hosts_spec.lua.
local hosts = require 'qoslab.hosts'

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local function slurp(path)
  local f = io.open(path, 'rb')
  if not f then return nil end
  local s = f:read('a')
  f:close()
  return s
end

describe('qoslab.hosts', function()
  after_each(function() hosts.configure(nil) end)

  describe('parse_target / parse_map / parse_ssh_option', function()
    it('takes [user@]addr[:port] in its forms', function()
      assert.same({ ssh = 'lab@10.0.0.1', port = 2222 }, hosts.parse_target('lab@10.0.0.1:2222'))
      assert.same({ ssh = '10.0.0.1' }, hosts.parse_target('10.0.0.1'))
      assert.same({ ssh = 'box-2.lab.example' }, hosts.parse_target('box-2.lab.example'))
      assert.same({ ssh = 'u@fd00::2', port = 22 }, hosts.parse_target('u@[fd00::2]:22'))
      assert.same({ ssh = 'fd00::2' }, hosts.parse_target('fd00::2'))
      assert.same({ ssh = 'fd00::2' }, hosts.parse_target('[fd00::2]'))
    end)

    it('refuses what ssh would read as an option or the shell as syntax, and bad ports', function()
      for _, bad in ipairs { '', '-oProxyCommand=x', 'u@-x', '-u@h', 'a b', 'h;rm', 'h:0', 'h:65536', 'h:x',
                             'u@', '@h', '[zz]:1', '[::1]x', 'h:1:2:3' } do
        local t, why = hosts.parse_target(bad)
        if bad == 'h:1:2:3' then
          assert.is_nil(t, 'h:1:2:3 is neither host:port nor an IPv6 address')
        else
          assert.is_nil(t, bad)
        end
        assert.matches('expected %[user@%]addr%[:port%]', why, nil, bad)
      end
    end)

    it('parses ROLE=target and names the role in what is wrong', function()
      local role, t = hosts.parse_map('server=lab@10.0.0.2:2200')
      assert.equal('server', role)
      assert.same({ ssh = 'lab@10.0.0.2', port = 2200 }, t)
      local r, why = hosts.parse_map('client=h:99999')
      assert.is_nil(r)
      assert.matches('^role client: expected %[user@%]addr%[:port%] %(a port number 1%-65535%), got "h:99999"$', why)
      assert.matches('expected ROLE=', select(2, hosts.parse_map('10.0.0.1')))
      assert.matches('with a role of letters', select(2, hosts.parse_map('1x=10.0.0.1')))
      assert.matches('with a role of letters', select(2, hosts.parse_map('=10.0.0.1')))
    end)

    it('takes KEY=VALUE ssh options', function()
      assert.equal('StrictHostKeyChecking=no', hosts.parse_ssh_option('StrictHostKeyChecking=no'))
      assert.equal('UserKnownHostsFile=/tmp/a b', hosts.parse_ssh_option('UserKnownHostsFile=/tmp/a b'))
      for _, bad in ipairs { 'x', '=y', 'Key=', '-o=x', 'Key=a\nb', 'Ke y=1' } do
        local o, why = hosts.parse_ssh_option(bad)
        assert.is_nil(o, bad)
        assert.matches('expected KEY=VALUE', why)
      end
    end)
  end)

  describe('configure', function()
    it('keeps a copy of the mapping and forgets it with nil', function()
      hosts.configure { roles = { server = { ssh = 'lab@h', port = 2 } }, options = { 'A=b' }, qoslab = '/q' }
      assert.same({ roles = { server = { ssh = 'lab@h', port = 2 } }, options = { 'A=b' }, qoslab = '/q' },
        hosts.configured())
      assert.same({ 'server' }, hosts.unused_roles())
      hosts.configure(nil)
      assert.is_nil(hosts.configured())
      assert.same({}, hosts.unused_roles())
    end)

    it('names the field of a bad mapping', function()
      assert.error_matches(function() hosts.configure { role = {} } end, 'cfg%.role: unknown key')
      assert.error_matches(function() hosts.configure { roles = { s = { ssh = 1 } } } end,
        'cfg%.roles%.s%.ssh: expected a string')
      assert.error_matches(function() hosts.configure { roles = { s = { ssh = 'h', port = 0 } } } end,
        'cfg%.roles%.s%.port: expected an integer in %[1, 65535%], got 0')
      assert.error_matches(function() hosts.configure { roles = { ['9'] = { ssh = 'h' } } } end,
        'cfg%.roles key: expected a role name')
    end)

    it('get gives this machine for an unmapped role and reads its metadata once', function()
      hosts.configure { roles = { server = { ssh = 'lab@192.0.2.1' } } }
      local h <close> = assert(hosts.get('client'))
      assert.equal('client', h.name)
      assert.is_nil(h.ssh)
      local info = hosts.infos().client
      assert.is_nil(info.error, info.error)
      assert.equal('client', info.role)
      assert.equal('local', info.connection)
      assert.equal(require('qoslab')._VERSION, info.qoslab_version)
      assert.equal('integer', math.type(info.mono_ns))
      -- the mapped role was never asked for
      assert.same({ 'server' }, hosts.unused_roles())
      -- a mapped role with a bad field: the role and the flag named
      hosts.configure { roles = { server = { ssh = 'lab@192.0.2.1' } }, options = { 'not an option' } }
      assert.error_matches(function() hosts.get('server') end,
        'qoslab%.hosts%.get: role server %(%-%-host%-map server=lab@192%.0%.2%.1%) with %-%-ssh%-identity/%-%-ssh%-option/'
        .. '%-%-remote%-qoslab as given: qoslab%.host: options%[1%]: expected a "Key=Value" string')
    end)

    it('get names a bad role or default', function()
      assert.error_matches(function() hosts.get(42) end, 'qoslab%.hosts%.get: role: expected a role name')
      assert.error_matches(function() hosts.get('a b') end, 'role: expected a role name')
      assert.error_matches(function() hosts.get('server', 'x') end, 'default: expected a table, got string "x"')
    end)
  end)

  describe('clients on this machine', function()
    it('runs two tests at once against a loopback server and sums them', function()
      local qoslab = require 'qoslab'
      local srv <close> = assert(qoslab.server { port = 0, bind_address = '127.0.0.1' })
      local a <close> = qoslab.host.localhost { name = 'a' }
      local b <close> = qoslab.host.localhost { name = 'b' }
      local t0 = qoslab.timer.now()
      local res = hosts.clients { clients = { a, b }, start_in_s = 0.5,
        test = { host = '127.0.0.1', port = srv:port(), duration_s = 1, bitrate_bps = 10000000 } }
      local took = qoslab.timer.now() - t0
      for i, e in ipairs(res.per_client) do
        assert.equal(({ 'a', 'b' })[i], e.name)
        assert.is_nil(e.error, e.error)
        assert.equal(res.start_mono_ns + e.offset_ns, e.start_at_mono_ns)
        assert(e.start_late_ns >= 0, 'started early: ' .. e.start_late_ns)
      end
      -- at once: two 1 s tests after a 0.5 s start take well under 2.5 s
      assert(took < 2.4, 'took ' .. took .. ' s')
      assert.equal(res.per_client[1].result.sent.bytes + res.per_client[2].result.sent.bytes, res.sum.sent_bytes)
      assert.equal(2, res.sum.ok)
      -- each test's clock started on the same instant, give or take its set-up
      local d = math.abs(res.per_client[1].result.start_time_unix_s - res.per_client[2].result.start_time_unix_s)
      assert(d < 0.05, 'test clocks ' .. d .. ' s apart')
    end)

    it('names a bad option', function()
      local a <close> = require('qoslab.host').localhost()
      assert.error_matches(function() hosts.clients { clients = { a }, test = {} } end, 'host')
      assert.error_matches(function() hosts.clients { clients = {}, test = {} } end,
        'opts%.clients: expected a list of 1%-64 qoslab%.host handles')
      assert.error_matches(function() hosts.clients { clients = { 42 }, test = {} } end,
        'opts%.clients%[1%]: expected a qoslab%.host handle, got 42')
      assert.error_matches(function() hosts.clients { clients = { a }, test = { host = 'x', start_at_mono_ns = 1 } } end,
        'opts%.test%.start_at_mono_ns: set by hosts%.clients')
      assert.error_matches(function() hosts.clients { clients = { a }, test = { host = 'x' }, names = { 'a', 'b' } } end,
        'opts%.names: expected a list of 1 names')
      assert.error_matches(function() hosts.clients { clients = { a }, test = { host = 'x' }, start_in_s = 0 } end,
        'opts%.start_in_s: expected a finite number in %[0%.05, 3600%]')
      assert.error_matches(function() hosts.clients { clients = { a }, test = { host = 'x' }, bogus = 1 } end,
        'opts%.bogus: unknown key')
    end)
  end)

  describe('sum and table', function()
    local function res(sent_bps, recv_bps, sent_b, recv_b, extra)
      local r = { sent = { bytes = sent_b, bits_per_second = sent_bps, retransmits = 3 },
                  received = { bytes = recv_b, bits_per_second = recv_bps } }
      for k, v in pairs(extra or {}) do r.received[k] = v end
      return r
    end

    it('adds every total over the clients with a result and counts the failed', function()
      local per = {
        { name = 'a', result = res(10.5e6, 10.25e6, 1000, 990) },
        { name = 'b', error = 'b: connection refused', code = 'ECONNREFUSED' },
        { name = 'c', result = res(20.125e6, 20e6, 2000, 1990) },
      }
      local s = hosts.sum(per)
      assert.same({ clients = 3, ok = 2, failed = 1, sent_bytes = 3000, received_bytes = 2980,
                    sent_bps = 10.5e6 + 20.125e6, received_bps = 10.25e6 + 20e6, retransmits = 6 }, s)
      assert.equal('integer', math.type(s.sent_bytes))
      assert.equal('float', math.type(s.received_bps))
      local u = hosts.sum { { name = 'x', result = res(1e6, 1e6, 10, 10, { lost_packets = 4, unique_packets = 6 }) },
                            { name = 'y', result = res(2e6, 2e6, 20, 20, { lost_packets = 1, unique_packets = 9 }) } }
      assert.equal(5, u.lost_packets)
      assert.equal(15, u.received_packets)
      assert.error_matches(function() hosts.sum { 1 } end, 'per_client%[1%]: expected a table')
    end)

    it('prints a row per client, the failed one with its error, and the sum row', function()
      local per = {
        { name = 'a', result = res(10.5e6, 10.25e6, 1000, 990), offset_ns = 1500000, offset_error_ns = 20000,
          start_late_ns = 2000000 },
        { name = 'b', error = 'b: connection refused (ECONNREFUSED)\nmore', offset_ns = 0, offset_error_ns = 0 },
      }
      local t = hosts.table { per_client = per, sum = hosts.sum(per), title = 'clients' }
      local lines = {}
      for l in t:gmatch('[^\n]+') do lines[#lines + 1] = l end
      assert.equal('clients', lines[1])
      assert.matches('^client +| sent Mbit/s | received Mbit/s | retransmits | clock offset ms | start late ms | error',
        lines[2])
      assert.matches('^a .*| +10%.50 | +10%.25 | +3 | +1%.500 ± 0%.020 | +2%.000 | %- *$', lines[4])
      assert.matches('^b .*| +%- | +%- | +%- | +0%.000 ± 0%.000 | +%- | b: connection refused %(ECONNREFUSED%)$', lines[5])
      assert.matches('^sum %(1 of 2%) | +10%.50 | +10%.25 | +3 | +%- | +%- | 1 failed *$', lines[6])
      assert.equal(6, #lines)
    end)
  end)
end)

describe('qoslab run host flags', function()
  local dir
  before_each(function()
    local p = assert(io.popen('mktemp -d /tmp/qoslab-hosts-spec.XXXXXX'))
    dir = p:read('l')
    p:close()
  end)
  after_each(function() os.execute('rm -rf ' .. q(dir)) end)

  local function qoslab(args)
    local p = assert(io.popen(string.format('bin/qoslab %s >%s 2>%s; echo $?', args, q(dir .. '/out'), q(dir .. '/err'))))
    local rc = tonumber(p:read('l'))
    p:close()
    return rc, slurp(dir .. '/out') or '', slurp(dir .. '/err') or ''
  end

  local function plan(text)
    local f = assert(io.open(dir .. '/p.lua', 'w'))
    f:write(text)
    f:close()
    return q(dir .. '/p.lua')
  end

  it('records the mapping in QOSLAB_RUN.hosts, stays on this host and names an unused role', function()
    -- The text names qoslab.netem.apply: without --host-map this kernel
    -- would carry it into the guest.
    local p = plan([[
-- qoslab.netem.apply is for the hosts here
local h = QOSLAB_RUN.hosts
print(h.roles.server.ssh, h.roles.server.port, h.roles.client.ssh, h.roles.client.port, h.options[1], h.options[2],
  h.qoslab, h.identity == ]] .. string.format('%q', dir .. '/key') .. [[)
]])
    local kf = assert(io.open(dir .. '/key', 'w'))
    kf:write('k\n')
    kf:close()
    local rc, out, err = qoslab('run ' .. p .. ' --out ' .. q(dir .. '/o') .. ' --host-map server=lab@10.9.0.2:2222'
      .. ' --host-map client=10.9.0.1 --ssh-option ConnectTimeout=3 --ssh-option "UserKnownHostsFile=/tmp/k h"'
      .. ' --remote-qoslab /opt/q/bin/qoslab --ssh-identity ' .. q(dir .. '/key'))
    assert.equal(0, rc, err)
    assert.equal('lab@10.9.0.2\t2222\t10.9.0.1\tnil\tConnectTimeout=3\tUserKnownHostsFile=/tmp/k h\t/opt/q/bin/qoslab\ttrue\n',
      out)
    assert.matches('on this host', err, 1, true)
    assert.not_matches('guest', err, 1, true)
    assert.matches('hosts over ssh: client=10.9.0.1, server=lab@10.9.0.2 port 2222', err, 1, true)
    assert.matches('warning: --host-map: the plan asked for no host of role client, server', err, 1, true)
  end)

  it('bad values name the flag, exit 2', function()
    local p = plan('print(1)\n')
    for _, c in ipairs {
      { '--host-map nothing', '--host-map: expected ROLE=[user@]addr[:port], got "nothing"' },
      { '--host-map s=h:0', '--host-map: role s: expected [user@]addr[:port] (a port number 1-65535)' },
      { '--host-map s=-oProxyCommand=x', '--host-map: role s: expected [user@]addr' },
      { '--host-map s=a --host-map s=b', '--host-map: role s given twice' },
      { '--host-map s=a --ssh-option Bad', '--ssh-option: expected KEY=VALUE' },
      { '--host-map s=a --ssh-identity /nonexistent/key', '--ssh-identity: expected a private key file, got '
        .. '"/nonexistent/key" (no such file)' },
      { '--host-map s=a --ssh-identity /tmp', '--ssh-identity: expected a private key file, got "/tmp" (a directory)' },
      { '--host-map s=a --remote-qoslab ""', '--remote-qoslab: expected the path of qoslab' },
      { '--ssh-option A=b', '--ssh-identity, --ssh-option and --remote-qoslab need a --host-map' },
      { '--host-map s=a --guest', '--host-map and --guest exclude each other' },
    } do
      local rc, out, err = qoslab('run ' .. p .. ' ' .. c[1])
      assert.equal(2, rc, c[1] .. ': ' .. err)
      assert.equal('', out, c[1])
      assert.matches('qoslab run: ' .. c[2], err, 1, true, c[1])
    end
  end)
end)
