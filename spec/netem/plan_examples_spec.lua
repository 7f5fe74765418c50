-- Every example and the demo, in their quick form, with real netem (this suite
-- runs inside the qemu guest: make check-netem). Each must exit 0 and leave
-- its results, CSV and PNG behind, its records naming the backend netem;
-- none may leave a namespace behind.
local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local function run(cmd)
  local p = assert(io.popen(cmd .. ' 2>&1; echo "rc=$?"'))
  local s = p:read('a')
  p:close()
  return tonumber(s:match('rc=(%d+)%s*$')), s
end

local function netns_count()
  local p = assert(io.popen('ip netns list 2>/dev/null | wc -l'))
  local n = tonumber(p:read('l'))
  p:close()
  return n
end

describe('examples with kernel netem (quick form)', function()
  local dir
  before_each(function()
    local p = assert(io.popen('mktemp -d /tmp/qoslab-examples.XXXXXX'))
    dir = p:read('l')
    p:close()
  end)
  after_each(function() os.execute('rm -rf ' .. q(dir)) end)

  for _, ex in ipairs { 'delay_sweep', 'loss_delay_matrix', 'window_sweep', 'parallel_clients', 'udp_bitrate',
                        'schedule' } do
    it(ex, function()
      local before = netns_count()
      local rc, out = run('bin/qoslab run examples/' .. ex .. '.lua --host --quick --out ' .. q(dir))
      assert.equal(0, rc, out)
      assert.matches('plot', out, 1, true)
      local p = assert(io.popen('ls ' .. q(dir)))
      local files = p:read('a')
      p:close()
      assert.matches('results.jsonl', files, 1, true)
      -- auto takes kernel netem here, and every record says so
      local f = assert(io.open(dir .. '/results.jsonl'))
      for line in f:lines() do
        assert.matches('"backend":"netem"', line, 1, true)
        assert.matches('"where":"host"', line, 1, true)
      end
      f:close()
      assert.matches('%.csv', files)
      assert.matches('%.png', files)
      assert.equal(before, netns_count())
    end)
  end

  it('demo --quick', function()
    local rc, out = run('bin/qoslab demo --host --quick --out ' .. q(dir))
    assert.equal(0, rc, out)
    assert.matches('on this host, backend netem', out, 1, true)
    -- the quick matrix (2 x 2) is drawn as a heat map alone: too small for a surface
    assert.is_nil(io.open(dir .. '/matrix-surface.png', 'rb'))
    for _, f in ipairs { 'delay.csv', 'delay.png', 'matrix-heatmap.png', 'window.png' } do
      local h = io.open(dir .. '/' .. f, 'rb')
      assert.is_not_nil(h, f)
      local head = h:read(4)
      h:close()
      if f:match('%.png$') then assert.equal('\137PNG', head, f) else assert.is_string(head, f) end
    end
  end)
end)
