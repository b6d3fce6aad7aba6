<% response.sendRedirect("info.jsp?from=redirect"); %>
