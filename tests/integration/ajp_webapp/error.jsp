<%@ page contentType="text/plain" %>
<% if (true) throw new IllegalStateException("test exception from error.jsp"); %>
