--- Subcommand `report` of bin/qoslab.
--
-- `qoslab report DIR [--out OUT]` writes `DIR/index.html`, or
-- `OUT/index.html` linking to DIR's files (`qoslab.report.page`);
-- `qoslab report DIR1 DIR2 ... [--out DIR]` compares the folders
-- (`qoslab.report.compare`): the same sweep's curve from each folder in one
-- plot, labelled by what differs in their metadata, and an index.html in
-- `--out` (default `results/compare-<UTC time>`).
-- Exit status: 0 written; 1 a folder is missing, not a folder or not a
-- results folder (`qoslab.report.page.check_folder`; in a comparison, one
-- without results.jsonl), or a file cannot be read or written; 2 bad
-- arguments.
-- @module qoslab.cli.report
local cli = require 'qoslab.cli'

local M = {}

local function eprint(...)
  io.stderr:write(table.concat({ ... }), '\n')
  io.stderr:flush()
end

local function describe(cmd)
  cmd:summary('Write the report page (index.html) of a results folder, or compare folders.')
  cmd:description('With one folder: DIR/index.html with the run\'s metadata, a table per sweep '
    .. '(from results.jsonl), every plot (PNG) and the data files. With several: one plot per '
    .. 'sweep they share, each folder\'s curve labelled by what differs in their metadata, '
    .. 'and an index.html in --out.')
  cmd:argument('dirs', 'Results folders.'):args('+')
  cmd:option('--out', 'Folder for the page: of a comparison (default results/compare-<UTC time>), or of '
    .. 'one folder that cannot be written (default DIR itself; the page links to DIR\'s files).')
end

local function run(a)
  if a.out == '' then
    eprint('qoslab report: --out: expected a folder path, got an empty string')
    return 2
  end
  if #a.dirs == 1 then
    local path, err, code = require('qoslab.report.page').write(a.dirs[1], { out = a.out })
    if not path then
      eprint('qoslab report: ', tostring(err), ' (', tostring(code), ')')
      if not a.out and (code == 'EROFS' or code == 'EACCES') then
        eprint('qoslab report: write the page elsewhere, linking to the folder\'s files: qoslab report ',
          a.dirs[1], ' --out OTHER_DIR')
      end
      return 1
    end
    print('qoslab report: wrote ' .. path)
    return 0
  end
  local out = a.out or ('results/compare-' .. os.date('!%Y%m%d-%H%M%S'))
  local res, err, code = require('qoslab.report.compare').write(a.dirs, { out = out })
  if not res then
    eprint('qoslab report: ', tostring(err), ' (', tostring(code), ')')
    return 1
  end
  for _, w in ipairs(res.warnings or {}) do eprint('qoslab report: ', w) end
  print('qoslab report: wrote ' .. res.path)
  return 0
end

M.command = { describe = describe, run = run }
cli.add('report', M.command)

return M
