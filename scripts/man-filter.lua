-- pandoc filter for the man pages made from docs/*.md.

-- A link to another part of the docs ("#listen-addresses", "bench.md") means nothing in a
-- terminal, so only its text is kept; web links keep their address.
function Link(link)
  if not link.target:match("^%a+://") then
    return link.content
  end
end

-- A table of three or four columns does not fit in 80 columns of a terminal (groff warns "table
-- wider than line width" and squeezes the text). Each row becomes a tagged paragraph, as man
-- pages list options: the first cell is the tag; every other cell follows, named by its header
-- unless it is the last (the meaning).
function Table(tbl)
  local simple = pandoc.utils.to_simple_table(tbl)
  local items = {}
  for _, row in ipairs(simple.rows) do
    local defs = {}
    for i = 2, #row do
      local blocks = row[i]
      local text = pandoc.utils.stringify(blocks)
      if text ~= "" and text ~= "—" then
        if i < #row then
          local label = pandoc.utils.stringify(simple.headers[i])
          local inlines = pandoc.List({ pandoc.Emph({ pandoc.Str(label .. ":") }), pandoc.Space() })
          for _, b in ipairs(blocks) do
            if b.content then inlines:extend(b.content) end
          end
          table.insert(defs, { pandoc.Para(inlines) })
        else
          local paras = {}
          for _, b in ipairs(blocks) do
            table.insert(paras, b.t == "Plain" and pandoc.Para(b.content) or b)
          end
          table.insert(defs, paras)
        end
      end
    end
    local merged = {}
    for _, d in ipairs(defs) do
      for _, b in ipairs(d) do table.insert(merged, b) end
    end
    local term = pandoc.List()
    for _, b in ipairs(row[1]) do
      if b.content then term:extend(b.content) end
    end
    table.insert(items, { term, { merged } })
  end
  return pandoc.DefinitionList(items)
end
