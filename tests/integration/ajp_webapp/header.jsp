<%@ page contentType="text/plain" session="false" trimDirectiveWhitespaces="true" %>
<%
  // A response header of ?size= bytes: large ones need a packetSize above 8 KiB.
  int size = Integer.parseInt(request.getParameter("size"));
  response.setHeader("X-Big", "b".repeat(size));
%>
ok
